package io.thaw.hadoop;

import io.thaw.client.ThawException;
import io.thaw.client.ThawReader;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Locale;
import java.util.function.IntFunction;
import org.apache.hadoop.fs.ByteBufferPositionedReadable;
import org.apache.hadoop.fs.ByteBufferReadable;
import org.apache.hadoop.fs.CanUnbuffer;
import org.apache.hadoop.fs.FSExceptionMessages;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.FileRange;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.StreamCapabilities;

/**
 * A Thaw file open for reading, as Hadoop's seekable stream: every read is a
 * positioned read of the native reader, which streams on with read-ahead
 * when a read continues the previous one and fetches exactly the bytes asked
 * for otherwise (so a columnar reader's scattered reads stay small). There is
 * no Java-side buffer: each call is one JNI crossing, and the bytes land
 * straight in the caller's array or direct buffer.
 *
 * <p>Seeking past the end is an EOFException (as HDFS); positioned reads
 * never move the position; {@link #unbuffer} drops the native streams and
 * mapped block files (Impala and HBase call it on idle streams). Vectored
 * reads use Hadoop's default over positioned reads, after an early check of
 * the ranges: the native reader serialises calls on one stream, so issuing
 * them at once would gain nothing.
 * {@link FileSystem.Statistics} counts every byte read.
 */
final class ThawInputStream extends FSInputStream
    implements ByteBufferReadable, ByteBufferPositionedReadable, CanUnbuffer, StreamCapabilities {
  private final ThawReader reader;
  private final String path;
  private final String master;
  private final FileSystem.Statistics stats;
  private final long length;
  private final byte[] oneByte = new byte[1];
  private long pos;
  private volatile boolean closed;

  ThawInputStream(ThawReader reader, String path, String master, FileSystem.Statistics stats) {
    this.reader = reader;
    this.path = path;
    this.master = master;
    this.stats = stats;
    this.length = reader.length();
  }

  private void checkOpen() throws IOException {
    if (closed) {
      throw new IOException(FSExceptionMessages.STREAM_IS_CLOSED + ": " + path);
    }
  }

  private IOException io(ThawException e) {
    return ThawErrors.translate(e, path, master);
  }

  private void count(int n) {
    if (n > 0 && stats != null) {
      stats.incrementBytesRead(n);
    }
  }

  @Override
  public synchronized void seek(long target) throws IOException {
    checkOpen();
    if (target < 0) {
      throw new EOFException(FSExceptionMessages.NEGATIVE_SEEK + ": " + target + " in " + path);
    }
    if (target > length) {
      throw new EOFException(FSExceptionMessages.CANNOT_SEEK_PAST_EOF + ": " + target + " > " + length + " in " + path);
    }
    pos = target;
  }

  /** The position, also after close (Hadoop's callers ask a closed stream where it stopped). */
  @Override
  public synchronized long getPos() {
    return pos;
  }

  /** Thaw has one copy to read from at a time; the native reader fails over itself. */
  @Override
  public boolean seekToNewSource(long targetPos) {
    return false;
  }

  @Override
  public synchronized int available() throws IOException {
    checkOpen();
    return (int) Math.min(Integer.MAX_VALUE, length - pos);
  }

  @Override
  public synchronized int read() throws IOException {
    int n = read(oneByte, 0, 1);
    return n <= 0 ? -1 : oneByte[0] & 0xff;
  }

  @Override
  public synchronized int read(byte[] buf, int off, int len) throws IOException {
    checkOpen();
    if (off < 0 || len < 0 || len > buf.length - off) {
      throw new IndexOutOfBoundsException("offset " + off + ", length " + len + ", buffer " + buf.length);
    }
    if (len == 0) {
      return 0;
    }
    int n;
    try {
      n = reader.read(pos, buf, off, len);
    } catch (ThawException e) {
      throw io(e);
    }
    if (n > 0) {
      pos += n;
      count(n);
    }
    return n;
  }

  /** Reads at {@code position} without moving the stream's position. */
  @Override
  public int read(long position, byte[] buf, int off, int len) throws IOException {
    validatePositionedReadArgs(position, buf, off, len);
    checkOpen();
    if (len == 0) {
      return 0;
    }
    try {
      int n = reader.read(position, buf, off, len);
      count(n);
      return n;
    } catch (ThawException e) {
      throw io(e);
    }
  }

  @Override
  public synchronized int read(ByteBuffer buf) throws IOException {
    int n = read(pos, buf);
    if (n > 0) {
      pos += n;
    }
    return n;
  }

  /** Into a direct buffer without a copy; into a heap buffer through its array. */
  @Override
  public int read(long position, ByteBuffer buf) throws IOException {
    checkOpen();
    if (position < 0) {
      throw new EOFException(FSExceptionMessages.NEGATIVE_SEEK + ": " + position + " in " + path);
    }
    if (!buf.hasRemaining()) {
      return 0;
    }
    int n;
    try {
      if (buf.isDirect()) {
        n = reader.read(position, buf);
      } else if (buf.hasArray()) {
        n = reader.read(position, buf.array(), buf.arrayOffset() + buf.position(), buf.remaining());
        if (n > 0) {
          buf.position(buf.position() + n);
        }
      } else {
        byte[] tmp = new byte[buf.remaining()];
        n = reader.read(position, tmp, 0, tmp.length);
        if (n > 0) {
          buf.put(tmp, 0, n);
        }
      }
    } catch (ThawException e) {
      throw io(e);
    }
    count(n);
    return n;
  }

  @Override
  public void readFully(long position, ByteBuffer buf) throws IOException {
    long at = position;
    while (buf.hasRemaining()) {
      int n = read(at, buf);
      if (n < 0) {
        throw new EOFException(
            FSExceptionMessages.EOF_IN_READ_FULLY + ": " + buf.remaining() + " bytes missing at " + at + " in " + path);
      }
      at += n;
    }
  }

  /**
   * Hadoop's default vectored read (ranges validated, merged, read one by one
   * with positioned reads), after checking every range against the length
   * known at open: a range past the end fails at this call, not in its future.
   */
  @Override
  public void readVectored(List<? extends FileRange> ranges, IntFunction<ByteBuffer> allocate) throws IOException {
    checkOpen();
    for (FileRange r : ranges) {
      if (r.getOffset() < 0 || r.getOffset() + r.getLength() > length) {
        throw new EOFException(
            "range [" + r.getOffset() + ", " + (r.getOffset() + r.getLength()) + ") is past the end ("
                + length + ") of " + path);
      }
    }
    super.readVectored(ranges, allocate);
  }

  @Override
  public synchronized void unbuffer() {
    if (!closed) {
      try {
        reader.unbuffer();
      } catch (ThawException e) {
        // Releasing resources early is an optimisation: a failure leaves them
        // to close(), and the next read opens what it needs again.
      }
    }
  }

  @Override
  public boolean hasCapability(String capability) {
    switch (capability.toLowerCase(Locale.ROOT)) {
      case StreamCapabilities.READBYTEBUFFER:
      case StreamCapabilities.PREADBYTEBUFFER:
      case StreamCapabilities.UNBUFFER:
      case StreamCapabilities.VECTOREDIO:
        return true;
      default:
        return false;
    }
  }

  /** Bytes read by source: short-circuit, remote MEM, remote DISK, under-store, fail-overs. */
  long[] readSources() throws IOException {
    try {
      return reader.stats();
    } catch (ThawException e) {
      throw io(e);
    }
  }

  @Override
  public synchronized void close() {
    if (!closed) {
      closed = true;
      reader.close();
    }
  }

  @Override
  public String toString() {
    return "ThawInputStream{" + path + ", pos=" + pos + ", length=" + length + (closed ? ", closed" : "") + "}";
  }
}
