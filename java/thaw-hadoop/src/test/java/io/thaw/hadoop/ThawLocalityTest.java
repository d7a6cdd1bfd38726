package io.thaw.hadoop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import io.thaw.client.ThawClient;
import io.thaw.proto.v1.BlockInfo;
import io.thaw.proto.v1.BlockReplica;
import io.thaw.proto.v1.Tier;
import java.io.IOException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.StorageType;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * Block locations on a real cluster: DISK hosts before a migration, the
 * migration's target while it waits, MEM hosts (and cachedHosts) after
 * {@code thaw migrate}; never every worker for a block nobody holds.
 */
public class ThawLocalityTest {
  private static final int BLOCK = 1 << 20;
  private static ThawCluster cluster;

  @BeforeClass
  public static void start() throws IOException {
    // The under-store read at 2 MiB/s, so a migration from it is seen waiting.
    cluster = ThawCluster.start(2, "--block-size", "1MiB", "--device-model", "ufs=2MiB/s");
  }

  @AfterClass
  public static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static void write(FileSystem fs, String path, String type, int blocks) throws IOException {
    FSDataOutputStreamBuilder<?, ?> b = fs.createFile(new Path(path)).recursive().blockSize(BLOCK);
    b.opt(ThawConf.WRITE_TYPE, type);
    try (FSDataOutputStream out = b.build()) {
      out.write(ThawFileSystemTest.random(blocks * BLOCK - 100, path.hashCode()));
    }
  }

  /** The data addresses of a block's replicas in {@code tier}, by the master. */
  private static Set<String> addresses(ThawClient c, String path, int block, Tier tier) throws IOException {
    BlockInfo b = c.stat(path, true).getInfo().getBlocks(block);
    return b.getReplicasList().stream()
        .filter(r -> r.getTier() == tier)
        .map(BlockReplica::getDataAddress)
        .collect(Collectors.toSet());
  }

  @Test
  public void diskHostsBeforeMigrationMemoryHostsAfter() throws Exception {
    try (FileSystem fs = cluster.fs();
        ThawClient c = cluster.client()) {
      write(fs, "/loc/disk", "replicated:1", 3);
      BlockLocation[] before = fs.getFileBlockLocations(new Path("/loc/disk"), 0, Long.MAX_VALUE);
      assertEquals(3, before.length);
      for (int i = 0; i < 3; i++) {
        BlockLocation l = before[i];
        assertTrue("DISK hosts before migration: " + l, l.getHosts().length > 0);
        assertEquals("nothing in memory yet: " + l, 0, l.getCachedHosts().length);
        assertEquals(addresses(c, "/loc/disk", i, Tier.TIER_DISK), new HashSet<>(Arrays.asList(l.getNames())));
        assertTrue(Arrays.stream(l.getStorageTypes()).allMatch(t -> t == StorageType.DISK));
        assertEquals((long) i * BLOCK, l.getOffset());
      }

      cluster.cli("--job", "loc-test", "migrate", "/loc/disk", "--wait", "--timeout", "60s");

      BlockLocation[] after = fs.getFileBlockLocations(new Path("/loc/disk"), 0, Long.MAX_VALUE);
      for (int i = 0; i < 3; i++) {
        BlockLocation l = after[i];
        Set<String> mem = addresses(c, "/loc/disk", i, Tier.TIER_MEM);
        assertTrue("in memory after migrate: " + l, !mem.isEmpty());
        assertEquals("names are the MEM replicas only", mem, new HashSet<>(Arrays.asList(l.getNames())));
        assertArrayEquals("cachedHosts are the hosts", l.getHosts(), l.getCachedHosts());
        assertTrue(Arrays.stream(l.getStorageTypes()).allMatch(t -> t == StorageType.RAM_DISK));
      }
      // listLocatedStatus answers the same in one listing.
      RemoteIterator<LocatedFileStatus> it = fs.listLocatedStatus(new Path("/loc"));
      LocatedFileStatus st = it.next();
      assertEquals("disk", st.getPath().getName());
      assertEquals(Arrays.toString(after[1].getNames()), Arrays.toString(st.getBlockLocations()[1].getNames()));
      assertArrayEquals(after[2].getCachedHosts(), st.getBlockLocations()[2].getCachedHosts());
      cluster.cli("--job", "loc-test", "evict");
    }
  }

  @Test
  public void underStoreOnlyBlocksNameNoHostThenTheMigrationTarget() throws Exception {
    try (FileSystem fs = cluster.fs();
        ThawClient c = cluster.client()) {
      write(fs, "/loc/ufs", "through", 4);
      for (BlockLocation l : fs.getFileBlockLocations(new Path("/loc/ufs"), 0, Long.MAX_VALUE)) {
        assertEquals("no replica and no migration: no host, never every worker", 0, l.getHosts().length);
      }
      c.migrate("target-test", List.of("/loc/ufs"), "explicit", 0, "ThawLocalityTest");
      // While the under-store is slow, waiting blocks name the worker they will land on.
      boolean sawTarget = false;
      long deadline = System.currentTimeMillis() + 30_000;
      while (System.currentTimeMillis() < deadline) {
        List<BlockInfo> blocks = c.stat("/loc/ufs", true).getInfo().getBlocksList();
        BlockLocation[] locs = fs.getFileBlockLocations(new Path("/loc/ufs"), 0, Long.MAX_VALUE);
        boolean allInMemory = true;
        for (int i = 0; i < locs.length; i++) {
          BlockInfo b = blocks.get(i);
          if (b.getReplicasCount() == 0 && b.hasMigrationTarget() && locs[i].getCachedHosts().length == 0) {
            if (locs[i].getNames().length == 1 && locs[i].getNames()[0].equals(b.getMigrationTarget().getDataAddress())) {
              sawTarget = true;
            }
          }
          allInMemory &= locs[i].getCachedHosts().length > 0;
        }
        if (allInMemory) {
          break;
        }
        Thread.sleep(20);
      }
      assertTrue("a waiting block named its migration target", sawTarget);
      c.evict("target-test", List.of());
    }
  }

  @Test
  public void theHostMapRenamesHosts() throws Exception {
    Configuration conf = cluster.conf();
    try (FileSystem plain = cluster.fs()) {
      write(plain, "/loc/mapped", "must-cache", 1);
      String thawHost = plain.getFileBlockLocations(new Path("/loc/mapped"), 0, 1)[0].getHosts()[0];
      conf.set(ThawConf.HOST_MAP, thawHost + "=executor-1.example");
      try (FileSystem mapped = FileSystem.newInstance(cluster.uri(), conf)) {
        BlockLocation l = mapped.getFileBlockLocations(new Path("/loc/mapped"), 0, 1)[0];
        assertArrayEquals(new String[] {"executor-1.example"}, l.getHosts());
        assertArrayEquals(new String[] {"executor-1.example"}, l.getCachedHosts());
      }
    }
  }
}
