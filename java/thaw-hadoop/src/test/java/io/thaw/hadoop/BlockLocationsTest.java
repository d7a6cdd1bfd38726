package io.thaw.hadoop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import io.thaw.proto.v1.BlockInfo;
import io.thaw.proto.v1.BlockReplica;
import io.thaw.proto.v1.FileInfo;
import io.thaw.proto.v1.Tier;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.StorageType;
import org.junit.Test;

/** The decision of which hosts a block's location names, on FileInfo protos built here (no cluster). */
public class BlockLocationsTest {
  private static BlockReplica replica(long worker, String host, Tier tier) {
    return BlockReplica.newBuilder()
        .setWorkerId(worker)
        .setHost(host)
        .setDataAddress("10.0.0." + worker + ":7000")
        .setRack("rack0")
        .setTier(tier)
        .build();
  }

  private static BlockInfo block(long offset, long length, BlockReplica... replicas) {
    BlockInfo.Builder b = BlockInfo.newBuilder().setBlockId(offset + 1).setOffset(offset).setLength(length);
    for (BlockReplica r : replicas) {
      b.addReplicas(r);
    }
    return b.build();
  }

  private static BlockLocation one(BlockInfo b) {
    return BlockLocations.of(b, HostMap.EMPTY);
  }

  @Test
  public void memoryReplicasAreTheHostsAndTheCachedHosts() throws Exception {
    BlockLocation loc =
        one(block(0, 100, replica(1, "a", Tier.TIER_DISK), replica(2, "b", Tier.TIER_MEM), replica(3, "c", Tier.TIER_MEM)));
    assertArrayEquals(new String[] {"b", "c"}, loc.getHosts());
    assertArrayEquals(new String[] {"b", "c"}, loc.getCachedHosts());
    assertArrayEquals(new String[] {"10.0.0.2:7000", "10.0.0.3:7000"}, loc.getNames());
    assertArrayEquals(new String[] {"/rack0/10.0.0.2:7000", "/rack0/10.0.0.3:7000"}, loc.getTopologyPaths());
    assertArrayEquals(new StorageType[] {StorageType.RAM_DISK, StorageType.RAM_DISK}, loc.getStorageTypes());
    assertEquals(0, loc.getOffset());
    assertEquals(100, loc.getLength());
  }

  @Test
  public void diskReplicasWhenNoneInMemory() throws Exception {
    BlockLocation loc = one(block(0, 100, replica(1, "a", Tier.TIER_DISK), replica(2, "b", Tier.TIER_DISK)));
    assertArrayEquals(new String[] {"a", "b"}, loc.getHosts());
    assertArrayEquals(new String[0], loc.getCachedHosts());
    assertArrayEquals(new StorageType[] {StorageType.DISK, StorageType.DISK}, loc.getStorageTypes());
  }

  @Test
  public void migrationTargetWhenNoReplica() throws Exception {
    BlockInfo b = block(0, 100).toBuilder().setMigrationTarget(replica(4, "d", Tier.TIER_MEM)).build();
    BlockLocation loc = one(b);
    assertArrayEquals(new String[] {"d"}, loc.getHosts());
    assertArrayEquals("not in memory yet", new String[0], loc.getCachedHosts());
    assertArrayEquals(new String[] {"10.0.0.4:7000"}, loc.getNames());
  }

  @Test
  public void replicasWinOverTheMigrationTarget() throws Exception {
    BlockInfo b =
        block(0, 100, replica(1, "a", Tier.TIER_DISK)).toBuilder().setMigrationTarget(replica(4, "d", Tier.TIER_MEM)).build();
    assertArrayEquals(new String[] {"a"}, one(b).getHosts());
  }

  @Test
  public void noReplicaAndNoTargetNamesNoHostNeverEveryWorker() throws Exception {
    BlockLocation loc = one(block(0, 100));
    assertEquals(0, loc.getHosts().length);
    assertEquals(0, loc.getNames().length);
    assertEquals(0, loc.getCachedHosts().length);
  }

  @Test
  public void oneEntryPerHostInTheMastersOrder() throws Exception {
    BlockLocation loc =
        one(block(0, 100, replica(5, "h2", Tier.TIER_MEM), replica(6, "h1", Tier.TIER_MEM), replica(7, "h2", Tier.TIER_MEM)));
    assertArrayEquals(new String[] {"h2", "h1"}, loc.getHosts());
    assertArrayEquals(new String[] {"10.0.0.5:7000", "10.0.0.6:7000"}, loc.getNames());
    assertArrayEquals(new String[] {"h2", "h1"}, loc.getCachedHosts());
  }

  @Test
  public void hostMapRenamesEveryHostButNotAddresses() throws Exception {
    HostMap map = HostMap.parse("a=exec-a.example, b = exec-b.example");
    BlockLocation loc =
        BlockLocations.of(block(0, 100, replica(1, "a", Tier.TIER_MEM), replica(2, "b", Tier.TIER_DISK)), map);
    assertArrayEquals(new String[] {"exec-a.example"}, loc.getHosts());
    assertArrayEquals(new String[] {"exec-a.example"}, loc.getCachedHosts());
    assertArrayEquals(new String[] {"10.0.0.1:7000"}, loc.getNames());
    BlockInfo target = block(0, 1).toBuilder().setMigrationTarget(replica(2, "b", Tier.TIER_MEM)).build();
    assertArrayEquals(new String[] {"exec-b.example"}, BlockLocations.of(target, map).getHosts());
    assertArrayEquals(new String[] {"zz"}, BlockLocations.of(block(0, 1, replica(9, "zz", Tier.TIER_MEM)), map).getHosts());
  }

  @Test
  public void rangeSelectsOverlappingBlocks() throws Exception {
    FileInfo f =
        FileInfo.newBuilder()
            .setLength(250)
            .addBlocks(block(0, 100, replica(1, "a", Tier.TIER_MEM)))
            .addBlocks(block(100, 100, replica(2, "b", Tier.TIER_DISK)))
            .addBlocks(block(200, 50))
            .build();
    assertEquals(3, BlockLocations.of(f, 0, Long.MAX_VALUE, HostMap.EMPTY).length);
    BlockLocation[] mid = BlockLocations.of(f, 150, 10, HostMap.EMPTY);
    assertEquals(1, mid.length);
    assertEquals(100, mid[0].getOffset());
    assertArrayEquals(new String[] {"b"}, mid[0].getHosts());
    assertEquals(2, BlockLocations.of(f, 99, 2, HostMap.EMPTY).length);
    assertEquals(0, BlockLocations.of(f, 0, 0, HostMap.EMPTY).length);
  }

  @Test
  public void rackPaths() {
    assertEquals("/rack0", BlockLocations.rackPath("rack0"));
    assertEquals("/dc/rack0", BlockLocations.rackPath("/dc/rack0"));
    assertEquals("/default-rack", BlockLocations.rackPath(""));
  }

  @Test
  public void badHostMapsAreClearErrors() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> HostMap.parse("a=b,c"));
    assertEquals(true, e.getMessage().contains("'c' is not thawHost=engineHost"));
    assertThrows(IllegalArgumentException.class, () -> HostMap.parse("a=b,a=c"));
    assertThrows(IllegalArgumentException.class, () -> HostMap.parse("=b"));
    assertEquals("x", HostMap.parse("").apply("x"));
  }
}
