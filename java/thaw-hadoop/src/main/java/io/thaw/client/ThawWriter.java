package io.thaw.client;

import io.thaw.proto.v1.FileInfo;
import java.nio.ByteBuffer;

/**
 * A file being written: bytes go to the chosen worker(s) as they come, by
 * the write type given at create. {@link #close} completes the file;
 * {@link #abort} abandons it. Thread-safe: calls are serialised.
 */
public final class ThawWriter {
  private long handle;

  ThawWriter(long handle) {
    this.handle = handle;
  }

  private long h() throws ThawException {
    long x = handle;
    if (x == 0) {
      throw new ThawException("failed-precondition", "stream is closed");
    }
    return x;
  }

  public synchronized void write(byte[] buf, int off, int len) throws ThawException {
    if (off < 0 || len < 0 || len > buf.length - off) {
      throw new IndexOutOfBoundsException("offset " + off + ", length " + len + ", buffer " + buf.length);
    }
    NativeClient.write(h(), buf, off, len);
  }

  /** Writes a direct buffer from its position to its limit, moving its position. */
  public synchronized void write(ByteBuffer direct) throws ThawException {
    if (!direct.isDirect()) {
      throw new IllegalArgumentException("not a direct buffer");
    }
    int n = direct.remaining();
    NativeClient.writeDirect(h(), direct, direct.position(), n);
    direct.position(direct.position() + n);
  }

  public synchronized long written() throws ThawException {
    return NativeClient.written(h());
  }

  public synchronized boolean isOpen() {
    return handle != 0;
  }

  /** Completes the file; the handle is gone after, also when this throws. */
  public synchronized FileInfo close() throws ThawException {
    long x = h();
    handle = 0;
    return ThawClient.parse(() -> FileInfo.parseFrom(NativeClient.closeWriter(x)));
  }

  /** Abandons the file (nothing when already closed). */
  public synchronized void abort() {
    if (handle != 0) {
      NativeClient.abortWriter(handle);
      handle = 0;
    }
  }
}
