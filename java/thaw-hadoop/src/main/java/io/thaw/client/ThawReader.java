package io.thaw.client;

import io.thaw.proto.v1.FileInfo;
import java.io.Closeable;
import java.nio.ByteBuffer;

/**
 * An open Thaw file: positioned reads from the nearest replica (short-circuit
 * on this host, else streamed from a worker, else read through from the
 * under-store), with fail-over. Thread-safe: calls are serialised.
 */
public final class ThawReader implements Closeable {
  private long handle;
  private final FileInfo info;

  ThawReader(long handle) throws ThawException {
    this.handle = handle;
    this.info = ThawClient.parse(() -> FileInfo.parseFrom(NativeClient.readerInfo(handle)));
  }

  /** The file's status when opened, with its blocks. */
  public FileInfo info() {
    return info;
  }

  public long length() {
    return info.getLength();
  }

  private long h() throws ThawException {
    long x = handle;
    if (x == 0) {
      throw new ThawException("failed-precondition", "stream is closed: " + info.getPath());
    }
    return x;
  }

  /** Up to {@code len} bytes at {@code position} (fewer only at the end); -1 at or past the end. */
  public synchronized int read(long position, byte[] buf, int off, int len) throws ThawException {
    if (off < 0 || len < 0 || len > buf.length - off) {
      throw new IndexOutOfBoundsException("offset " + off + ", length " + len + ", buffer " + buf.length);
    }
    return NativeClient.pread(h(), position, buf, off, len);
  }

  /** Reads into a direct buffer from its position to its limit, moving its position. */
  public synchronized int read(long position, ByteBuffer direct) throws ThawException {
    if (!direct.isDirect()) {
      throw new IllegalArgumentException("not a direct buffer");
    }
    int n = NativeClient.preadDirect(h(), position, direct, direct.position(), direct.remaining());
    if (n > 0) {
      direct.position(direct.position() + n);
    }
    return n;
  }

  /** Bytes read by source: short-circuit, remote MEM, remote DISK, under-store, fail-overs. */
  public synchronized long[] stats() throws ThawException {
    return NativeClient.readStats(h());
  }

  /** Drops open streams and mapped files; the next read opens them again. */
  public synchronized void unbuffer() throws ThawException {
    NativeClient.unbufferReader(h());
  }

  @Override
  public synchronized void close() {
    if (handle != 0) {
      NativeClient.closeReader(handle);
      handle = 0;
    }
  }
}
