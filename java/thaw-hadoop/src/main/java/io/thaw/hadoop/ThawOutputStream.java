package io.thaw.hadoop;

import io.thaw.client.ThawException;
import io.thaw.client.ThawWriter;
import java.io.IOException;
import java.io.OutputStream;
import org.apache.hadoop.fs.FSExceptionMessages;

/**
 * A Thaw file being written. Small writes gather in a buffer (one JNI
 * crossing per {@value #BUFFER} bytes, not per {@code write(int)}); large ones
 * go straight through. The file appears at create and is complete, readable
 * and of its final length at {@link #close}; Thaw has no hflush/hsync (a
 * block is committed whole), so the stream declares neither (it offers no StreamCapabilities) and
 * {@code FSDataOutputStream} turns them into {@link #flush}, which only hands
 * the buffer to the native writer. A failed write aborts the file.
 * {@code FileSystem.Statistics} counts bytes in {@code FSDataOutputStream}.
 */
final class ThawOutputStream extends OutputStream {
  static final int BUFFER = 1 << 20;

  private final ThawWriter writer;
  private final String path;
  private final String master;
  private final byte[] buf = new byte[BUFFER];
  private int count;
  private boolean closed;

  ThawOutputStream(ThawWriter writer, String path, String master) {
    this.writer = writer;
    this.path = path;
    this.master = master;
  }

  private void checkOpen() throws IOException {
    if (closed) {
      throw new IOException(FSExceptionMessages.STREAM_IS_CLOSED + ": " + path);
    }
  }

  @Override
  public synchronized void write(int b) throws IOException {
    checkOpen();
    if (count == buf.length) {
      drain();
    }
    buf[count++] = (byte) b;
  }

  @Override
  public synchronized void write(byte[] b, int off, int len) throws IOException {
    checkOpen();
    if (off < 0 || len < 0 || len > b.length - off) {
      throw new IndexOutOfBoundsException("offset " + off + ", length " + len + ", buffer " + b.length);
    }
    if (len >= buf.length) {
      drain();
      send(b, off, len);
    } else {
      if (len > buf.length - count) {
        drain();
      }
      System.arraycopy(b, off, buf, count, len);
      count += len;
    }
  }

  private void drain() throws IOException {
    if (count > 0) {
      send(buf, 0, count);
      count = 0;
    }
  }

  private void send(byte[] b, int off, int len) throws IOException {
    try {
      writer.write(b, off, len);
    } catch (ThawException e) {
      closed = true;
      writer.abort();
      throw ThawErrors.translate(e, path, master);
    }
  }

  @Override
  public synchronized void flush() throws IOException {
    if (!closed) {
      drain();
    }
  }

  /** Completes the file (idempotent); a failure leaves no file behind. */
  @Override
  public synchronized void close() throws IOException {
    if (closed) {
      return;
    }
    try {
      drain();
    } finally {
      closed = true;
    }
    try {
      writer.close();
    } catch (ThawException e) {
      throw ThawErrors.translate(e, path, master);
    }
  }

  @Override
  public String toString() {
    return "ThawOutputStream{" + path + (closed ? ", closed" : "") + "}";
  }
}
