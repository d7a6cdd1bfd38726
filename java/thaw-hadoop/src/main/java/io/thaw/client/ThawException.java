package io.thaw.client;

import java.io.IOException;

/**
 * A failure Thaw reported: its kind (the Rust client's {@code ErrorKind}, as
 * {@code not-found}, {@code already-exists}, {@code permission-denied},
 * {@code unavailable}, ...) and its message. The Hadoop layer turns each kind
 * into the exception Hadoop's callers expect (FileNotFoundException, ...).
 */
public class ThawException extends IOException {
  private static final long serialVersionUID = 1L;

  private final String kind;

  /** Made by the native library (its signature is part of the JNI boundary). */
  public ThawException(String kind, String message) {
    super(message);
    this.kind = kind;
  }

  /** The error's kind, as the Rust client names it. */
  public String kind() {
    return kind;
  }
}
