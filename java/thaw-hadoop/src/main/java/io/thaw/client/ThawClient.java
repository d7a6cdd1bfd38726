package io.thaw.client;

import com.google.protobuf.InvalidProtocolBufferException;
import io.thaw.proto.v1.FileInfo;
import io.thaw.proto.v1.GetClusterStatusResponse;
import io.thaw.proto.v1.GetStatusResponse;
import io.thaw.proto.v1.JobInfo;
import io.thaw.proto.v1.LineageInfo;
import io.thaw.proto.v1.ListJobsResponse;
import io.thaw.proto.v1.ListStatusResponse;
import io.thaw.proto.v1.WhoAmIResponse;
import java.io.Closeable;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * A handle on a Thaw cluster from the JVM, over the Rust client (JNI). Safe
 * to share between threads; clients made by {@link #withJob} share
 * connections. Every call throws {@link ThawException} on failure.
 */
public final class ThawClient implements Closeable {
  private long handle;

  private ThawClient(long handle) {
    this.handle = handle;
  }

  /**
   * A client with these options ({@code master}, {@code job}, {@code host},
   * {@code rack}, {@code worker}, {@code short_circuit}, {@code read_cache},
   * {@code token}, {@code secret_file}, {@code tls_ca}; see
   * {@link NativeClient#connect}). Options not given come from the
   * environment ({@code THAW_MASTER}, {@code THAW_TOKEN}, ...).
   */
  public static ThawClient connect(Map<String, String> options) throws ThawException {
    String[] pairs =
        options.entrySet().stream()
            .filter(e -> e.getValue() != null)
            .map(e -> e.getKey() + "=" + e.getValue())
            .toArray(String[]::new);
    return new ThawClient(NativeClient.connect(pairs));
  }

  /** The same cluster and connections, with {@code job} on every read and write. */
  public ThawClient withJob(String job) throws ThawException {
    return new ThawClient(NativeClient.withJob(h(), job));
  }

  long h() {
    long x = handle;
    if (x == 0) {
      throw new IllegalStateException("this Thaw client is closed");
    }
    return x;
  }

  public GetStatusResponse stat(String path, boolean blocks) throws ThawException {
    return parse(() -> GetStatusResponse.parseFrom(NativeClient.stat(h(), path, blocks)));
  }

  /** A page of a directory's entries after {@code startAfter} (see {@link NativeClient#list}). */
  public ListStatusResponse list(String path, boolean blocks, String startAfter, int limit) throws ThawException {
    return parse(() -> ListStatusResponse.parseFrom(NativeClient.list(h(), path, blocks, startAfter, limit)));
  }

  public FileInfo mkdir(String path, boolean recursive, boolean existOk, int mode) throws ThawException {
    return parse(() -> FileInfo.parseFrom(NativeClient.mkdir(h(), path, recursive, existOk, mode)));
  }

  public void delete(String path, boolean recursive) throws ThawException {
    NativeClient.delete(h(), path, recursive);
  }

  public FileInfo rename(String src, String dst) throws ThawException {
    return parse(() -> FileInfo.parseFrom(NativeClient.rename(h(), src, dst)));
  }

  /** chmod/chown/chgrp; {@code mode} &lt; 0 and null names: unchanged. */
  public FileInfo setAttributes(String path, int mode, String owner, String group) throws ThawException {
    return parse(() -> FileInfo.parseFrom(NativeClient.setAttributes(h(), path, mode, owner, group)));
  }

  public WhoAmIResponse whoAmI() throws ThawException {
    return parse(() -> WhoAmIResponse.parseFrom(NativeClient.whoAmI(h())));
  }

  public GetClusterStatusResponse clusterStatus() throws ThawException {
    return parse(() -> GetClusterStatusResponse.parseFrom(NativeClient.clusterStatus(h())));
  }

  public FileInfo persistWait(String path, long timeoutMs) throws ThawException {
    return parse(() -> FileInfo.parseFrom(NativeClient.persistWait(h(), path, timeoutMs)));
  }

  /** Opens a complete file. */
  public ThawReader open(String path) throws ThawException {
    return new ThawReader(NativeClient.open(h(), path));
  }

  /** Creates a file (see {@link NativeClient#create} for the options). */
  public ThawWriter create(
      String path,
      String writeType,
      long blockSize,
      boolean overwrite,
      boolean recursive,
      int mode,
      long length,
      boolean temporary)
      throws ThawException {
    return new ThawWriter(
        NativeClient.create(h(), path, writeType, blockSize, overwrite, recursive, mode, length, temporary));
  }

  /** Starts migrating {@code paths} into memory for {@code job} (Ignem/DYRS); see {@link NativeClient#migrate}. */
  public JobInfo migrate(String job, List<String> paths, String eviction, long leaseMs, String origin)
      throws ThawException {
    String[] p = paths.toArray(new String[0]);
    return parse(() -> JobInfo.parseFrom(NativeClient.migrate(h(), job, p, eviction, leaseMs, origin)));
  }

  /** Renews leases; returns the jobs the master does not know. */
  public List<String> renewLeases(List<String> jobs) throws ThawException {
    return Arrays.asList(NativeClient.renewLeases(h(), jobs.toArray(new String[0])));
  }

  /** Releases the job's blocks under {@code paths} (all: empty list, ending it); its state if it goes on, else null. */
  public JobInfo evict(String job, List<String> paths) throws ThawException {
    byte[] b = NativeClient.evict(h(), job, paths.toArray(new String[0]));
    return b == null ? null : parse(() -> JobInfo.parseFrom(b));
  }

  /** Every job, or the one named. */
  public ListJobsResponse jobs(String job) throws ThawException {
    return parse(() -> ListJobsResponse.parseFrom(NativeClient.jobs(h(), job == null ? "" : job)));
  }

  /** Records a lineage before its outputs are written (Tachyon, section 2.3). */
  public LineageInfo submitDependency(
      long[] inputFids, List<String> outputs, List<String> command, byte[] config, String kind)
      throws ThawException {
    return parse(
        () ->
            LineageInfo.parseFrom(
                NativeClient.submitDependency(
                    h(),
                    inputFids,
                    outputs.toArray(new String[0]),
                    command.toArray(new String[0]),
                    config,
                    kind)));
  }

  public LineageInfo lineage(long id, String path) throws ThawException {
    return parse(() -> LineageInfo.parseFrom(NativeClient.lineage(h(), id, path == null ? "" : path)));
  }

  @Override
  public synchronized void close() {
    if (handle != 0) {
      NativeClient.free(handle);
      handle = 0;
    }
  }

  interface Parse<T> {
    T run() throws InvalidProtocolBufferException, ThawException;
  }

  static <T> T parse(Parse<T> p) throws ThawException {
    try {
      return p.run();
    } catch (InvalidProtocolBufferException e) {
      ThawException t = new ThawException("internal", "undecodable answer from the native client: " + e);
      t.initCause(e);
      throw t;
    }
  }
}
