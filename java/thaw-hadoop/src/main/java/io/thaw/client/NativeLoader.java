package io.thaw.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads {@code libthaw_jni} once per JVM: from {@code -Dthaw.native.lib=PATH}
 * or {@code THAW_JNI_LIB} when set (development), else from the copy the jar
 * carries ({@code /native/linux-x86_64/libthaw_jni.so}), extracted to a
 * temporary file, so the one jar is all a Hadoop or Spark classpath needs.
 */
public final class NativeLoader {
  private static final String RESOURCE = "/native/linux-x86_64/libthaw_jni.so";
  private static boolean loaded;

  private NativeLoader() {}

  /** Loads the library (again: nothing). A missing or wrong library is an {@link UnsatisfiedLinkError}. */
  public static synchronized void load() {
    if (loaded) {
      return;
    }
    String explicit = System.getProperty("thaw.native.lib");
    if (explicit == null || explicit.isEmpty()) {
      explicit = System.getenv("THAW_JNI_LIB");
    }
    if (explicit != null && !explicit.isEmpty()) {
      System.load(Path.of(explicit).toAbsolutePath().toString());
      loaded = true;
      return;
    }
    String os = System.getProperty("os.name", "").toLowerCase();
    String arch = System.getProperty("os.arch", "");
    if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      throw new UnsatisfiedLinkError(
          "this Thaw jar carries its native library for linux-x86_64 only (this JVM: "
              + os + "/" + arch + "); build it for yours and set -Dthaw.native.lib");
    }
    try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new UnsatisfiedLinkError(
            "the Thaw jar has no " + RESOURCE + ": build it with `make java`, or set -Dthaw.native.lib");
      }
      Path tmp = Files.createTempFile("libthaw_jni", ".so");
      tmp.toFile().deleteOnExit();
      Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
      System.load(tmp.toAbsolutePath().toString());
      loaded = true;
    } catch (IOException e) {
      UnsatisfiedLinkError err = new UnsatisfiedLinkError("cannot extract the Thaw native library: " + e);
      err.initCause(e);
      throw err;
    }
  }
}
