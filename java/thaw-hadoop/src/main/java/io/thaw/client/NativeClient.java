package io.thaw.client;

import java.nio.ByteBuffer;

/**
 * The JNI boundary to Thaw's Rust client ({@code crates/thaw-jni}, loaded by
 * {@link NativeLoader}): one data-protocol implementation for every language,
 * with short-circuit reads, master fail-over and auth. One tokio runtime per
 * JVM serves every handle.
 *
 * <p>Handles are opaque {@code long}s (0 is never a handle); each is freed by
 * exactly one call ({@link #free}, {@link #closeReader}, {@link #closeWriter} or
 * {@link #abortWriter}). Metadata crosses as the protobuf bytes of the messages
 * in {@code proto/thaw/v1} (decoded with {@code io.thaw.proto.v1}). Every call
 * that can fail throws {@link ThawException} with the error's kind. Calls on
 * one reader or writer are serialised by the native side; a client handle may
 * be used from any number of threads at once.
 */
final class NativeClient {
  private NativeClient() {}

  static {
    NativeLoader.load();
  }

  /**
   * A client. {@code options} are {@code key=value} pairs, each optional:
   * {@code master} (one address or a group, comma-separated; default
   * {@code THAW_MASTER}), {@code job}, {@code host}, {@code rack}, {@code worker}
   * (the client's position), {@code short_circuit} (true/false),
   * {@code read_cache} (mem, disk, none), {@code token}, {@code secret_file},
   * {@code tls_ca}. Credentials not given come from the environment
   * ({@code THAW_TOKEN}, {@code THAW_TOKEN_FILE}, {@code THAW_SECRET_FILE}).
   * The master is dialled lazily: a wrong address fails the first call.
   */
  static native long connect(String[] options) throws ThawException;

  /** The same cluster and connections, with another job id on every read and write. */
  static native long withJob(long client, String job) throws ThawException;

  static native void free(long client);

  // ---- namespace ----

  /** {@code GetStatusResponse}: the status (with blocks: each block's replicas ordered by locality, and its migration target). */
  static native byte[] stat(long client, String path, boolean blocks) throws ThawException;

  /**
   * {@code ListStatusResponse}: a directory's entries in name order after
   * {@code startAfter} ("" from the first), at most {@code limit} (0: all),
   * with {@code truncated} set when more follow; a file lists itself.
   */
  static native byte[] list(long client, String path, boolean blocks, String startAfter, int limit)
      throws ThawException;

  /** {@code FileInfo} of the directory; the directories it makes get {@code mode} (&lt; 0: 0755), one that exists keeps its own. */
  static native byte[] mkdir(long client, String path, boolean recursive, boolean existOk, int mode)
      throws ThawException;

  static native void delete(long client, String path, boolean recursive) throws ThawException;

  /** {@code FileInfo} of the renamed entry. */
  static native byte[] rename(long client, String src, String dst) throws ThawException;

  /** chmod/chown/chgrp; {@code mode} &lt; 0 and null strings: unchanged. {@code FileInfo}. */
  static native byte[] setAttributes(long client, String path, int mode, String owner, String group)
      throws ThawException;

  /** {@code WhoAmIResponse}: whom the master takes this client for. */
  static native byte[] whoAmI(long client) throws ThawException;

  /** {@code GetClusterStatusResponse}: workers (hosts, tiers) and totals. */
  static native byte[] clusterStatus(long client) throws ThawException;

  /** {@code FileInfo} once {@code path}'s under-store copy is in place (or an error after {@code timeoutMs}). */
  static native byte[] persistWait(long client, String path, long timeoutMs) throws ThawException;

  // ---- reading ----

  /** A reader of a complete file (a lost file with lineage waits for its rebuild). */
  static native long open(long client, String path) throws ThawException;

  /** {@code FileInfo} of the open file, with its blocks. */
  static native byte[] readerInfo(long reader);

  /**
   * Reads up to {@code len} bytes at {@code position} into {@code buf[off..]}:
   * as many as are there before the end of the file (fewer only at the end);
   * -1 at or past the end. A read continuing the previous one streams on with
   * read-ahead; any other is ranged (exactly its bytes, as HDFS's pread).
   */
  static native int pread(long reader, long position, byte[] buf, int off, int len) throws ThawException;

  /** {@link #pread} into a direct buffer's bytes {@code [off, off+len)} (its position is not moved). */
  static native int preadDirect(long reader, long position, ByteBuffer direct, int off, int len)
      throws ThawException;

  /** Bytes read so far by source: short-circuit, remote MEM, remote DISK, under-store, and fail-overs. */
  static native long[] readStats(long reader);

  /** Drops the reader's open streams and mapped files, keeping the handle (Hadoop's unbuffer). */
  static native void unbufferReader(long reader);

  static native void closeReader(long reader);

  // ---- writing ----

  /**
   * A writer. {@code writeType}: must-cache, cache-through, through,
   * async-through, replicated:N (N DISK copies; null: cache-through); {@code blockSize}
   * 0 and {@code mode} &lt; 0: the defaults; {@code length} 0: not known.
   */
  static native long create(
      long client,
      String path,
      String writeType,
      long blockSize,
      boolean overwrite,
      boolean recursive,
      int mode,
      long length,
      boolean temporary)
      throws ThawException;

  static native void write(long writer, byte[] buf, int off, int len) throws ThawException;

  /** Writes a direct buffer's bytes {@code [off, off+len)} (its position is not moved). */
  static native void writeDirect(long writer, ByteBuffer direct, int off, int len) throws ThawException;

  /** Bytes written so far. */
  static native long written(long writer);

  /** Completes the file and frees the handle (also when it throws); {@code FileInfo}. */
  static native byte[] closeWriter(long writer) throws ThawException;

  /** Abandons the file (deleted at the master) and frees the handle. */
  static native void abortWriter(long writer);

  // ---- jobs (Ignem/DYRS migration; Scheduled caching's hints) ----

  /**
   * Registers {@code job} and starts moving the blocks of {@code paths} into
   * memory ({@code eviction}: explicit or implicit; {@code leaseMs} 0: the
   * master's default; {@code origin}: who submitted it, shown by
   * {@code thaw jobs}). {@code JobInfo}.
   */
  static native byte[] migrate(long client, String job, String[] paths, String eviction, long leaseMs, String origin)
      throws ThawException;

  /** Renews the jobs' leases; returns those the master does not know (submit them again). */
  static native String[] renewLeases(long client, String[] jobs) throws ThawException;

  /** Releases the job's blocks under {@code paths}, or all (ending it) when empty; {@code JobInfo} if it goes on, else null. */
  static native byte[] evict(long client, String job, String[] paths) throws ThawException;

  /** {@code ListJobsResponse}: every job, or the one named ({@code job} non-empty). */
  static native byte[] jobs(long client, String job) throws ThawException;

  // ---- lineage (Tachyon, section 2.3-2.5) ----

  /**
   * Records a lineage before its outputs are written: {@code command} (argv)
   * with {@code config} derives {@code outputs} from the files {@code inputFids};
   * {@code kind}: narrow or wide. {@code LineageInfo}.
   */
  static native byte[] submitDependency(
      long client, long[] inputFids, String[] outputs, String[] command, byte[] config, String kind)
      throws ThawException;

  /** {@code LineageInfo} by id ({@code path} empty) or of the lineage that wrote {@code path}. */
  static native byte[] lineage(long client, long id, String path) throws ThawException;
}
