package io.thaw.hadoop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotSame;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import io.thaw.client.ThawClient;
import io.thaw.proto.v1.FileInfo;
import io.thaw.proto.v1.WriteType;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.permission.FsPermission;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * thaw:// end to end on the JVM's shared cluster: byte-exact round trips with
 * each write type, paged listings, FileContext, statistics, shared clients
 * and the errors a bad path gives. (Locations, failures and credentials need
 * clusters of their own: {@link ThawLocalityTest}, {@link ThawFailureTest}.)
 */
public class ThawFileSystemTest {
  private ThawCluster cluster;
  private FileSystem fs;
  private ThawClient client;

  @Before
  public void setUp() throws IOException {
    cluster = ThawCluster.shared();
    fs = cluster.fs();
    client = cluster.client();
    fs.delete(new Path("/fstest"), true);
  }

  @After
  public void tearDown() throws IOException {
    if (fs != null) {
      fs.close();
    }
    if (client != null) {
      client.close();
    }
  }

  static byte[] random(int n, long seed) {
    byte[] b = new byte[n];
    new Random(seed).nextBytes(b);
    return b;
  }

  static byte[] readAll(FileSystem fs, Path p) throws IOException {
    int len = (int) fs.getFileStatus(p).getLen();
    byte[] out = new byte[len];
    try (FSDataInputStream in = fs.open(p)) {
      in.readFully(0, out);
      assertEquals(-1, in.read(len, new byte[1], 0, 1));
    }
    return out;
  }

  private void roundTrip(String type, WriteType expected, boolean viaBuilder) throws IOException {
    // 3 MiB and a bit over 1 MiB blocks: several blocks, a short last one.
    byte[] data = random(3 * (1 << 20) + 12345, type.hashCode());
    Path p = new Path("/fstest/types/" + type + (viaBuilder ? "-builder" : "-conf"));
    if (viaBuilder) {
      // As a Hadoop user writes it: the builder, then Thaw's option on it.
      FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(p).recursive().blockSize(1 << 20);
      builder.opt(ThawConf.WRITE_TYPE, type);
      try (FSDataOutputStream out = builder.build()) {
        out.write(data, 0, 1000);
        for (int i = 1000; i < 5000; i++) {
          out.write(data[i]);
        }
        out.write(data, 5000, data.length - 5000);
      }
    } else {
      Configuration conf = cluster.conf();
      conf.set(ThawConf.WRITE_TYPE, type);
      try (FileSystem typed = FileSystem.newInstance(cluster.uri(), conf);
          FSDataOutputStream out = typed.create(p, true, 4096, (short) 1, 1 << 20)) {
        out.write(data);
      }
    }
    assertArrayEquals(type, data, readAll(fs, p));
    FileInfo info = client.stat(p.toUri().getPath(), true).getInfo();
    assertEquals(type, expected, info.getWriteType());
    assertEquals(4, info.getBlocksCount());
    assertEquals(1 << 20, fs.getFileStatus(p).getBlockSize());
  }

  @Test
  public void everyWriteTypeRoundTripsByteExact() throws IOException {
    roundTrip("must-cache", WriteType.WRITE_TYPE_MUST_CACHE, false);
    roundTrip("cache-through", WriteType.WRITE_TYPE_CACHE_THROUGH, false);
    roundTrip("through", WriteType.WRITE_TYPE_THROUGH, false);
    roundTrip("async-through", WriteType.WRITE_TYPE_ASYNC_THROUGH, false);
    roundTrip("must-cache", WriteType.WRITE_TYPE_MUST_CACHE, true);
    roundTrip("through", WriteType.WRITE_TYPE_THROUGH, true);
    // The write type reached the under-store: through is there at once.
    assertTrue(client.stat("/fstest/types/through-conf", false).getInfo().getPersisted());
    assertTrue(java.nio.file.Files.exists(cluster.ufs.resolve("fstest/types/through-conf")));
  }

  @Test
  public void badWriteTypesAndUnknownMandatoryOptionsAreRejected() throws IOException {
    Path p = new Path("/fstest/bad");
    FSDataOutputStreamBuilder<?, ?> fast = fs.createFile(p);
    fast.opt(ThawConf.WRITE_TYPE, "fast");
    assertThrows(IllegalArgumentException.class, fast::build);
    FSDataOutputStreamBuilder<?, ?> nonsense = fs.createFile(p);
    nonsense.must("fs.thaw.nonsense", "1");
    assertThrows(IllegalArgumentException.class, nonsense::build);
    Configuration conf = cluster.conf();
    conf.set(ThawConf.WRITE_TYPE, "cache-thru");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> FileSystem.newInstance(cluster.uri(), conf));
    assertTrue(e.getMessage(), e.getMessage().contains("cache-thru"));
  }

  @Test
  public void readsSeekPositionedAndByteBuffers() throws IOException {
    byte[] data = random(200_000, 7);
    Path p = new Path("/fstest/read");
    try (FSDataOutputStream out = fs.create(p)) {
      out.write(data);
    }
    try (FSDataInputStream in = fs.open(p)) {
      in.seek(150_000);
      byte[] b = new byte[100];
      in.readFully(b);
      assertArrayEquals(java.util.Arrays.copyOfRange(data, 150_000, 150_100), b);
      assertEquals(150_100, in.getPos());
      // Positioned reads leave the position alone.
      in.readFully(10, b);
      assertArrayEquals(java.util.Arrays.copyOfRange(data, 10, 110), b);
      assertEquals(150_100, in.getPos());
      ByteBuffer direct = ByteBuffer.allocateDirect(1000);
      in.readFully(5_000, direct);
      direct.flip();
      byte[] got = new byte[1000];
      direct.get(got);
      assertArrayEquals(java.util.Arrays.copyOfRange(data, 5_000, 6_000), got);
      ByteBuffer heap = ByteBuffer.allocate(500);
      assertEquals(500, in.read(heap));
      assertArrayEquals(java.util.Arrays.copyOfRange(data, 150_100, 150_600), heap.array());
      assertTrue(in.hasCapability("in:preadbytebuffer"));
      assertTrue(in.hasCapability("in:unbuffer"));
      assertThrows(java.io.EOFException.class, () -> in.seek(data.length + 1));
    }
  }

  @Test
  public void statisticsCountBytesAndOperations() throws IOException {
    Path p = new Path("/fstest/stats");
    FileSystem.Statistics st = FileSystem.getStatistics("thaw", ThawFileSystem.class);
    long r0 = st.getBytesRead();
    long w0 = st.getBytesWritten();
    long wo0 = st.getWriteOps();
    long ro0 = st.getReadOps();
    try (FSDataOutputStream out = fs.create(p)) {
      out.write(random(12_345, 1));
    }
    readAll(fs, p);
    assertEquals(12_345, st.getBytesWritten() - w0);
    assertEquals(12_345, st.getBytesRead() - r0);
    assertTrue(st.getWriteOps() - wo0 >= 1);
    assertTrue(st.getReadOps() - ro0 >= 2);
  }

  @Test
  public void listStatusIteratorPagesThroughLargeDirectories() throws IOException {
    Configuration conf = cluster.conf();
    conf.setInt(ThawConf.LIST_PAGE, 7);
    List<String> expected = new ArrayList<>();
    try (FileSystem paged = FileSystem.newInstance(cluster.uri(), conf)) {
      for (int i = 0; i < 40; i++) {
        String name = String.format("f%03d", i);
        expected.add(name);
        paged.create(new Path("/fstest/many/" + name)).close();
      }
      paged.mkdirs(new Path("/fstest/many/zdir"));
      expected.add("zdir");
      FileSystem.Statistics st = FileSystem.getStatistics("thaw", ThawFileSystem.class);
      long pages0 = st.getLargeReadOps();
      List<String> seen = new ArrayList<>();
      RemoteIterator<FileStatus> it = paged.listStatusIterator(new Path("/fstest/many"));
      while (it.hasNext()) {
        seen.add(it.next().getPath().getName());
      }
      assertEquals(expected, seen);
      // 41 entries, 7 per page: 6 pages (the last says no more follow).
      assertEquals(6, st.getLargeReadOps() - pages0);
      assertEquals(41, paged.listStatus(new Path("/fstest/many")).length);
      RemoteIterator<org.apache.hadoop.fs.LocatedFileStatus> files =
          paged.listFiles(new Path("/fstest/many"), false);
      int n = 0;
      while (files.hasNext()) {
        assertTrue(files.next().isFile());
        n++;
      }
      assertEquals(40, n);
      assertEquals(40, paged.getContentSummary(new Path("/fstest/many")).getFileCount());
      assertEquals(2, paged.getContentSummary(new Path("/fstest/many")).getDirectoryCount());
    }
  }

  @Test
  public void fileContextWorks() throws IOException {
    Configuration conf = cluster.conf();
    // FileContext finds implementations by this key only (no service files), as for HDFS's.
    conf.set("fs.AbstractFileSystem.thaw.impl", Thaw.class.getName());
    FileContext fc = FileContext.getFileContext(cluster.uri(), conf);
    Path dir = new Path("/fstest/fc");
    fc.mkdir(dir, FsPermission.getDirDefault(), true);
    byte[] data = random(70_000, 3);
    try (FSDataOutputStream out =
        fc.create(new Path(dir, "a"), EnumSet.of(CreateFlag.CREATE), Options.CreateOpts.createParent())) {
      out.write(data);
    }
    fc.rename(new Path(dir, "a"), new Path(dir, "b"));
    assertFalse(fc.util().exists(new Path(dir, "a")));
    byte[] got = new byte[data.length];
    try (FSDataInputStream in = fc.open(new Path(dir, "b"))) {
      in.readFully(got);
    }
    assertArrayEquals(data, got);
    assertEquals(1, fc.util().listStatus(dir).length);
    assertEquals(1, fc.getFileBlockLocations(new Path(dir, "b"), 0, data.length).length);
    assertTrue(fc.delete(dir, true));
    assertThrows(FileNotFoundException.class, () -> fc.getFileStatus(dir));
  }

  @Test
  public void renameFollowsHdfs() throws IOException {
    Path a = new Path("/fstest/mv/a");
    Path dir = new Path("/fstest/mv/dir");
    fs.create(a).close();
    fs.mkdirs(dir);
    assertTrue(fs.rename(a, dir));
    assertTrue(fs.exists(new Path(dir, "a")));
    assertFalse("missing source", fs.rename(a, new Path("/fstest/mv/x")));
    assertFalse("missing parent", fs.rename(new Path(dir, "a"), new Path("/fstest/nope/x")));
    assertFalse("into itself", fs.rename(dir, new Path(dir, "sub")));
    fs.create(new Path("/fstest/mv/c")).close();
    assertFalse("onto a file", fs.rename(new Path(dir, "a"), new Path("/fstest/mv/c")));
  }

  @Test
  public void permissionsAndOwners() throws IOException {
    Path p = new Path("/fstest/perm");
    fs.create(p, new FsPermission((short) 0600), true, 4096, (short) 1, 1 << 20, null).close();
    assertEquals((short) 0600, fs.getFileStatus(p).getPermission().toShort());
    fs.setPermission(p, new FsPermission((short) 0640));
    assertEquals((short) 0640, fs.getFileStatus(p).getPermission().toShort());
    fs.setOwner(p, "alice", "analysts");
    FileStatus st = fs.getFileStatus(p);
    assertEquals("alice", st.getOwner());
    assertEquals("analysts", st.getGroup());
    // mkdirs gives the directories it makes their permission; one that
    // exists keeps its own (as HDFS).
    Path d = new Path("/fstest/permdir/sub");
    assertTrue(fs.mkdirs(d, new FsPermission((short) 0700)));
    assertEquals((short) 0700, fs.getFileStatus(d).getPermission().toShort());
    assertEquals((short) 0700, fs.getFileStatus(d.getParent()).getPermission().toShort());
    assertTrue(fs.mkdirs(d, new FsPermission((short) 0755)));
    assertEquals((short) 0700, fs.getFileStatus(d).getPermission().toShort());
  }

  @Test
  public void badPathsGiveClearErrors() throws IOException {
    Path missing = new Path("/fstest/missing/file");
    assertThrows(FileNotFoundException.class, () -> fs.getFileStatus(missing));
    assertThrows(FileNotFoundException.class, () -> fs.open(missing));
    assertThrows(FileNotFoundException.class, () -> fs.listStatus(missing));
    assertFalse(fs.delete(missing, true));
    assertFalse(fs.exists(missing));
    // Hadoop's Path keeps a leading "..": the master refuses it, saying why.
    Path escaping = new Path("/../../etc/passwd");
    IOException e = assertThrows(IOException.class, () -> fs.getFileStatus(escaping));
    assertTrue(e.getMessage(), e.getMessage().contains("'..'"));
    e = assertThrows(IOException.class, () -> fs.create(new Path("/fstest/../../x")));
    assertTrue(e.getMessage(), e.getMessage().contains("'..'"));
    UnsupportedOperationException u =
        assertThrows(UnsupportedOperationException.class, () -> fs.append(new Path("/fstest/x")));
    assertTrue(u.getMessage(), u.getMessage().contains("immutable"));
    Path other = new Path("thaw://elsewhere:1/x");
    assertThrows(IllegalArgumentException.class, () -> fs.getFileStatus(other));
  }

  @Test
  public void fileSystemsWithEqualSettingsShareOneClient() throws IOException {
    int before = ClientCache.size();
    Configuration conf = cluster.conf();
    conf.set(ThawConf.JOB, "share-test");
    ThawFileSystem a = (ThawFileSystem) FileSystem.newInstance(cluster.uri(), conf);
    ThawFileSystem b = (ThawFileSystem) FileSystem.newInstance(cluster.uri(), conf);
    assertSame(a.client(), b.client());
    conf.set(ThawConf.JOB, "another-job");
    ThawFileSystem c = (ThawFileSystem) FileSystem.newInstance(cluster.uri(), conf);
    assertNotSame(a.client(), c.client());
    // Two job clients over one job-less base client (maybe already held by others).
    assertTrue(ClientCache.size() - before <= 3);
    a.close();
    b.close();
    c.close();
    assertEquals(before, ClientCache.size());
  }

  @Test
  public void aStreamOutlivesItsFileSystem() throws IOException {
    Path p = new Path("/fstest/outlive");
    byte[] data = random(10_000, 5);
    try (FSDataOutputStream out = fs.create(p)) {
      out.write(data);
    }
    // A job of its own: this file system holds the only lease on its client.
    Configuration conf = cluster.conf();
    conf.set(ThawConf.JOB, "outlive-test");
    FileSystem own = FileSystem.newInstance(cluster.uri(), conf);
    FSDataInputStream in = own.open(p);
    own.close();
    // The native reader keeps its own reference to the connections.
    byte[] got = new byte[data.length];
    in.readFully(0, got);
    assertArrayEquals(data, got);
    in.close();
    in.close();
    assertThrows(IOException.class, () -> in.read());
  }

  @Test
  public void aGroupOfMastersInTheAuthority() throws IOException {
    // A dead address beside the live master: the client finds the one that serves.
    java.net.URI group = java.net.URI.create("thaw://127.0.0.1:9," + cluster.master + "/");
    try (FileSystem g = FileSystem.newInstance(group, cluster.conf())) {
      Path p = new Path(group.toString() + "fstest/group");
      g.create(p).close();
      assertTrue(g.exists(p));
      assertEquals(group.getAuthority(), g.getFileStatus(p).getPath().toUri().getAuthority());
    }
  }
}
