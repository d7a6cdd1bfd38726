package io.thaw.hadoop;

import io.thaw.client.ThawClient;
import io.thaw.client.ThawException;
import io.thaw.client.ThawReader;
import io.thaw.client.ThawWriter;
import io.thaw.proto.v1.FileInfo;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.ContentSummary;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.PathIsNotEmptyDirectoryException;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.impl.PathCapabilitiesSupport;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.util.Progressable;

/**
 * {@code thaw://} for Hadoop: the FileSystem Spark, Hive, Trino's Hive
 * connector and MapReduce reach Thaw through, over the Rust client by JNI
 * (one data protocol for every language, with short-circuit reads, master
 * fail-over and auth; see {@link io.thaw.client.NativeClient}).
 *
 * <p>The master comes from the URI's authority ({@code thaw://host:port/},
 * or a group {@code thaw://a:1,b:2/}), else {@code fs.thaw.master}, else
 * {@code THAW_MASTER}; the job id every read and write carries from
 * {@code fs.thaw.job}, else Spark's application id. Instances with equal
 * settings share one native client ({@link ClientCache}).
 *
 * <p>Semantics follow HDFS where Thaw can (docs/hadoop.md and
 * src/test/resources/contract/thaw.xml state them): create makes parents,
 * rename into an existing directory moves under it and answers false where
 * HDFS does, listings are paged, block locations name the hosts holding a
 * block in memory ({@link BlockLocations}). Not supported: append and concat
 * (a complete Thaw file is immutable: its blocks may sit in several
 * workers' memory and in the under-store), hflush/hsync (blocks are committed
 * whole), symlinks, extended attributes, snapshots.
 */
public class ThawFileSystem extends FileSystem {
  public static final String SCHEME = "thaw";

  private URI uri;
  private String master;
  private Path workingDir;
  private ClientCache.Lease lease;
  private ThawClient client;
  private String writeType;
  private long blockSize;
  private boolean blockSizeSet;
  private int listPage;
  private HostMap hostMap;
  private boolean closed;

  @Override
  public String getScheme() {
    return SCHEME;
  }

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    super.initialize(name, conf);
    setConf(conf);
    master = ThawConf.master(name, conf);
    String authority = name.getAuthority();
    uri = URI.create(SCHEME + "://" + (authority == null ? "" : authority) + "/");
    writeType = ThawConf.writeType(conf.get(ThawConf.WRITE_TYPE, ThawConf.WRITE_TYPE_DEFAULT), ThawConf.WRITE_TYPE);
    blockSizeSet = conf.get(ThawConf.BLOCK_SIZE) != null;
    blockSize = conf.getLongBytes(ThawConf.BLOCK_SIZE, ThawConf.BLOCK_SIZE_DEFAULT);
    if (blockSize <= 0) {
      throw new IllegalArgumentException(ThawConf.BLOCK_SIZE + " must be positive, not " + blockSize);
    }
    listPage = conf.getInt(ThawConf.LIST_PAGE, ThawConf.LIST_PAGE_DEFAULT);
    if (listPage <= 0) {
      throw new IllegalArgumentException(ThawConf.LIST_PAGE + " must be positive, not " + listPage);
    }
    hostMap = HostMap.parse(conf.get(ThawConf.HOST_MAP, ""));
    try {
      lease = ClientCache.acquire(ThawConf.clientOptions(master, conf), ThawConf.job(conf));
    } catch (ThawException e) {
      throw ThawErrors.translate(e, uri.toString(), master);
    }
    client = lease.client;
    String user = UserGroupInformation.getCurrentUser().getShortUserName();
    workingDir = makeQualified(new Path("/user/" + user));
  }

  /** The native client this file system uses (shared; do not close it): for integrations that submit jobs. */
  public ThawClient client() {
    return client;
  }

  /** The master (or group of masters) this file system talks to. */
  public String master() {
    return master;
  }

  @Override
  public URI getUri() {
    return uri;
  }

  @Override
  public Path getWorkingDirectory() {
    return workingDir;
  }

  @Override
  public void setWorkingDirectory(Path dir) {
    workingDir = makeQualified(dir.isAbsolute() ? dir : new Path(workingDir, dir));
  }

  /** No delegation tokens: Thaw's tokens travel in the configuration or the environment. */
  @Override
  public String getCanonicalServiceName() {
    return null;
  }

  @Override
  public long getDefaultBlockSize() {
    return blockSize;
  }

  @Override
  public long getDefaultBlockSize(Path f) {
    return blockSize;
  }

  /** One copy per block is what a file needs; the write type decides where. */
  @Override
  public short getDefaultReplication() {
    return 1;
  }

  @Override
  public short getDefaultReplication(Path path) {
    return 1;
  }

  // ---- paths, statuses, errors ----

  /** The Thaw path of {@code p} (absolute, no scheme); checks it belongs here. */
  String thawPath(Path p) {
    checkPath(p);
    Path abs = p.isAbsolute() ? p : new Path(workingDir, p);
    String s = abs.toUri().getPath();
    return s == null || s.isEmpty() ? "/" : s;
  }

  private Path qualified(String thawPath) {
    return new Path(uri.getScheme(), uri.getAuthority(), thawPath);
  }

  IOException io(ThawException e, String path) {
    return ThawErrors.translate(e, qualified(path).toString(), master);
  }

  /**
   * An error of a lookup (stat, list, open): a path through a file names
   * nothing, which Hadoop's callers expect as FileNotFoundException (as
   * HDFS answers), not as ParentNotDirectoryException.
   */
  IOException lookup(ThawException e, String path) {
    if (e.kind().equals("not-a-directory")) {
      FileNotFoundException fnf = new FileNotFoundException(qualified(path) + ": " + e.getMessage());
      fnf.initCause(e);
      return fnf;
    }
    return io(e, path);
  }

  /** A file or directory as Hadoop sees it (one replica: the write type decides Thaw's copies). */
  FileStatus status(FileInfo f) {
    long block = f.getIsDir() ? 0 : f.getBlockSize();
    return new FileStatus(
        f.getIsDir() ? 0 : f.getLength(),
        f.getIsDir(),
        1,
        block,
        f.getMtimeMs(),
        0,
        new FsPermission((short) (f.getMode() & 07777)),
        f.getOwner(),
        f.getGroup(),
        qualified(f.getPath()));
  }

  LocatedFileStatus located(FileInfo f) {
    BlockLocation[] locs = f.getIsDir() ? null : BlockLocations.of(f, 0, Long.MAX_VALUE, hostMap);
    return new LocatedFileStatus(status(f), locs);
  }

  private void readOp() {
    statistics.incrementReadOps(1);
  }

  private void writeOp() {
    statistics.incrementWriteOps(1);
  }

  // ---- reading ----

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    String p = thawPath(f);
    readOp();
    ThawReader reader;
    try {
      reader = client.open(p);
    } catch (ThawException e) {
      String why = null;
      if (e.kind().equals("is-a-directory")) {
        // HDFS's answer ("not a file"), which Hadoop's callers expect.
        why = " is a directory, not a file";
      } else if (e.kind().equals("failed-precondition") && isIncomplete(p)) {
        // Blocks are committed whole: none of a file's bytes are visible
        // before its writer closes it (contract: create-visibility-delayed).
        why = " is still being written: its bytes are visible once its writer closes it";
      }
      if (why != null) {
        FileNotFoundException fnf = new FileNotFoundException(qualified(p) + why);
        fnf.initCause(e);
        throw fnf;
      }
      throw lookup(e, p);
    }
    return new FSDataInputStream(new ThawInputStream(reader, qualified(p).toString(), master, statistics));
  }

  private boolean isIncomplete(String p) {
    try {
      FileInfo f = client.stat(p, false).getInfo();
      return !f.getIsDir() && !f.getComplete();
    } catch (ThawException e) {
      return false;
    }
  }

  // ---- writing ----

  @Override
  public FSDataOutputStream create(
      Path f,
      FsPermission permission,
      boolean overwrite,
      int bufferSize,
      short replication,
      long blockSize,
      Progressable progress)
      throws IOException {
    return create(f, permission, overwrite, true, blockSize, writeType);
  }

  @Override
  public FSDataOutputStream createNonRecursive(
      Path f,
      FsPermission permission,
      EnumSet<CreateFlag> flags,
      int bufferSize,
      short replication,
      long blockSize,
      Progressable progress)
      throws IOException {
    return create(f, permission, flags.contains(CreateFlag.OVERWRITE), false, blockSize, writeType);
  }

  /**
   * Creates {@code f} with {@code type} (a checked write type). A block size
   * equal to the default while {@code fs.thaw.block.size} is unset goes as 0,
   * so the master's own default applies: callers that name no size get the
   * cluster's, not this client's guess of it.
   */
  FSDataOutputStream create(
      Path f, FsPermission permission, boolean overwrite, boolean recursive, long blockSize, String type)
      throws IOException {
    String p = thawPath(f);
    writeOp();
    long bs = (!blockSizeSet && blockSize == this.blockSize) ? 0 : blockSize;
    int mode = permission == null ? -1 : permission.toShort() & 07777;
    if (overwrite) {
      // The master replaces an empty directory when asked to overwrite;
      // Hadoop's contract (and HDFS) never lets a file replace a directory.
      FileInfo existing = statOrNull(p);
      if (existing != null && existing.getIsDir()) {
        throw new FileAlreadyExistsException(qualified(p) + " is a directory");
      }
    }
    ThawWriter writer;
    try {
      writer = client.create(p, type, bs, overwrite, recursive, mode, 0, false);
    } catch (ThawException e) {
      if (e.kind().equals("is-a-directory") || e.kind().equals("directory-not-empty")) {
        FileAlreadyExistsException dir = new FileAlreadyExistsException(qualified(p) + " is a directory");
        dir.initCause(e);
        throw dir;
      }
      throw io(e, p);
    }
    return new FSDataOutputStream(new ThawOutputStream(writer, qualified(p).toString(), master), statistics);
  }

  /** The write type of files created without one ({@code fs.thaw.write.type}). */
  String defaultWriteType() {
    return writeType;
  }

  /**
   * A builder whose {@code opt}/{@code must("fs.thaw.write.type", ...)} picks
   * this file's write type (must-cache for intermediate data, through for
   * outputs no one reads soon), on top of Hadoop's create options.
   */
  @Override
  public FSDataOutputStreamBuilder<FSDataOutputStream, ?> createFile(Path path) {
    return new ThawOutputStreamBuilder(this, path).create().overwrite(true);
  }

  /** Unsupported: a complete Thaw file is immutable (its blocks may be in memory on several workers and in the under-store). */
  @Override
  public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
    throw new UnsupportedOperationException(
        "thaw:// does not append (" + makeQualified(f) + "): a complete Thaw file is immutable; write a new file instead");
  }

  @Override
  public void concat(Path trg, Path[] psrcs) throws IOException {
    throw new UnsupportedOperationException(
        "thaw:// does not concat (" + makeQualified(trg) + "): a complete Thaw file is immutable; write a new file instead");
  }

  // ---- namespace ----

  /**
   * HDFS's rename: into {@code dst} when it is a directory, else to
   * {@code dst}; false (nothing moved) when the source is missing, the
   * destination exists as a file, its parent is missing or is a file, or a
   * directory would move into itself. Other failures (permissions, a master
   * that is down) throw.
   */
  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    String s = thawPath(src);
    String d = thawPath(dst);
    writeOp();
    if (s.equals("/")) {
      return false;
    }
    FileInfo source = statOrNull(s);
    if (source == null) {
      return false;
    }
    if (s.equals(d)) {
      return !source.getIsDir();
    }
    if (d.startsWith(s.endsWith("/") ? s : s + "/")) {
      return false;
    }
    FileInfo target = statOrNull(d);
    if (target != null) {
      if (!target.getIsDir()) {
        return false;
      }
      d = (d.equals("/") ? "" : d) + "/" + source.getName();
      if (d.equals(s)) {
        return true;
      }
      if (statOrNull(d) != null) {
        return false;
      }
    } else {
      String parent = new Path(d).getParent() == null ? "/" : new Path(d).getParent().toUri().getPath();
      FileInfo p = statOrNull(parent);
      if (p == null || !p.getIsDir()) {
        return false;
      }
    }
    try {
      client.rename(s, d);
      return true;
    } catch (ThawException e) {
      switch (e.kind()) {
        case "not-found":
        case "already-exists":
        case "not-a-directory":
          // Lost a race with another client: the checks above no longer hold.
          return false;
        default:
          throw io(e, s);
      }
    }
  }

  private FileInfo statOrNull(String p) throws IOException {
    readOp();
    try {
      return client.stat(p, false).getInfo();
    } catch (ThawException e) {
      if (e.kind().equals("not-found") || e.kind().equals("not-a-directory")) {
        return null;
      }
      throw io(e, p);
    }
  }

  /**
   * False when nothing is there; a non-empty directory without
   * {@code recursive} throws. The root is never deleted nor emptied by one
   * call (false, as HDFS answers {@code rm -r /}).
   */
  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    String p = thawPath(f);
    writeOp();
    if (p.equals("/")) {
      if (!recursive && listStatusIterator(f).hasNext()) {
        throw new PathIsNotEmptyDirectoryException(qualified(p).toString());
      }
      return false;
    }
    try {
      client.delete(p, recursive);
      return true;
    } catch (ThawException e) {
      if (e.kind().equals("not-found")) {
        return false;
      }
      throw io(e, p);
    }
  }

  /** Makes {@code f} and its missing parents, with {@code permission} under the umask (as HDFS). */
  @Override
  public boolean mkdirs(Path f, FsPermission permission) throws IOException {
    String p = thawPath(f);
    writeOp();
    FsPermission perm = permission == null ? FsPermission.getDirDefault() : permission;
    int mode = perm.applyUMask(FsPermission.getUMask(getConf())).toShort() & 07777;
    try {
      client.mkdir(p, true, true, mode);
      return true;
    } catch (ThawException e) {
      if (e.kind().equals("already-exists")) {
        FileAlreadyExistsException file = new FileAlreadyExistsException(qualified(p) + " exists and is a file");
        file.initCause(e);
        throw file;
      }
      throw io(e, p);
    }
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    String p = thawPath(f);
    readOp();
    try {
      return status(client.stat(p, false).getInfo());
    } catch (ThawException e) {
      throw lookup(e, p);
    }
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    List<FileStatus> out = new ArrayList<>();
    RemoteIterator<FileStatus> it = listStatusIterator(f);
    while (it.hasNext()) {
      out.add(it.next());
    }
    return out.toArray(new FileStatus[0]);
  }

  /** Entries in name order, {@code fs.thaw.list.page} per master call. */
  @Override
  public RemoteIterator<FileStatus> listStatusIterator(Path f) throws IOException {
    String p = thawPath(f);
    return new Listing<>(
        after -> {
          statistics.incrementLargeReadOps(1);
          return client.list(p, false, after, listPage);
        },
        this::status,
        x -> true,
        e -> lookup(e, p));
  }

  /** Statuses with every block's locations, from one listing (no call per file, as Spark lists). */
  @Override
  protected RemoteIterator<LocatedFileStatus> listLocatedStatus(Path f, PathFilter filter) throws IOException {
    String p = thawPath(f);
    return new Listing<>(
        after -> {
          statistics.incrementLargeReadOps(1);
          return client.list(p, true, after, listPage);
        },
        this::located,
        x -> filter.accept(qualified(x.getPath())),
        e -> lookup(e, p));
  }

  @Override
  public BlockLocation[] getFileBlockLocations(FileStatus file, long start, long len) throws IOException {
    if (file == null) {
      return null;
    }
    return getFileBlockLocations(file.getPath(), start, len);
  }

  /** The blocks overlapping {@code [start, start+len)}, with the hosts that hold them in memory (see {@link BlockLocations}). */
  @Override
  public BlockLocation[] getFileBlockLocations(Path f, long start, long len) throws IOException {
    if (start < 0 || len < 0) {
      throw new IllegalArgumentException("Invalid start or len parameter: " + start + ", " + len);
    }
    String p = thawPath(f);
    readOp();
    FileInfo info;
    try {
      info = client.stat(p, true).getInfo();
    } catch (ThawException e) {
      throw lookup(e, p);
    }
    if (info.getIsDir() || info.getLength() <= start) {
      return new BlockLocation[0];
    }
    return BlockLocations.of(info, start, len, hostMap);
  }

  /** Totals of a subtree, walked with paged listings (a directory counts itself, as HDFS). */
  @Override
  public ContentSummary getContentSummary(Path f) throws IOException {
    FileStatus root = getFileStatus(f);
    long[] t = new long[3]; // length, files, directories
    if (root.isFile()) {
      t[0] = root.getLen();
      t[1] = 1;
    } else {
      List<Path> dirs = new ArrayList<>(List.of(root.getPath()));
      while (!dirs.isEmpty()) {
        Path dir = dirs.remove(dirs.size() - 1);
        t[2]++;
        RemoteIterator<FileStatus> it = listStatusIterator(dir);
        while (it.hasNext()) {
          FileStatus s = it.next();
          if (s.isDirectory()) {
            dirs.add(s.getPath());
          } else {
            t[0] += s.getLen();
            t[1]++;
          }
        }
      }
    }
    return new ContentSummary.Builder()
        .length(t[0])
        .fileCount(t[1])
        .directoryCount(t[2])
        .spaceConsumed(t[0])
        .quota(-1)
        .spaceQuota(-1)
        .build();
  }

  @Override
  public void setPermission(Path f, FsPermission permission) throws IOException {
    String p = thawPath(f);
    writeOp();
    try {
      client.setAttributes(p, permission.toShort() & 07777, null, null);
    } catch (ThawException e) {
      throw io(e, p);
    }
  }

  /** Owner and/or group (null: unchanged; both null is an error, as HDFS). */
  @Override
  public void setOwner(Path f, String username, String groupname) throws IOException {
    if (username == null && groupname == null) {
      throw new IllegalArgumentException("setOwner " + f + ": username and groupname are both null");
    }
    String p = thawPath(f);
    writeOp();
    try {
      client.setAttributes(p, -1, username, groupname);
    } catch (ThawException e) {
      throw io(e, p);
    }
  }

  @Override
  public boolean hasPathCapability(Path path, String capability) throws IOException {
    switch (PathCapabilitiesSupport.validatePathCapabilityArgs(makeQualified(path), capability).toLowerCase(Locale.ROOT)) {
      case CommonPathCapabilities.FS_PERMISSIONS:
        return true;
      case CommonPathCapabilities.FS_APPEND:
      case CommonPathCapabilities.FS_CONCAT:
      case CommonPathCapabilities.FS_CHECKSUMS:
      case CommonPathCapabilities.FS_SYMLINKS:
        return false;
      default:
        return super.hasPathCapability(path, capability);
    }
  }

  /** Closes this instance (paths marked deleteOnExit go first); the shared client lives while others hold it. */
  @Override
  public synchronized void close() throws IOException {
    if (closed) {
      return;
    }
    try {
      super.close();
    } finally {
      closed = true;
      if (lease != null) {
        ClientCache.release(lease);
      }
    }
  }

  @Override
  public String toString() {
    return "ThawFileSystem{" + uri + ", master=" + master + ", writeType=" + writeType + "}";
  }
}
