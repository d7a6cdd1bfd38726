package io.thaw.hadoop;

import io.thaw.proto.v1.BlockInfo;
import io.thaw.proto.v1.BlockReplica;
import io.thaw.proto.v1.FileInfo;
import io.thaw.proto.v1.Tier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.StorageType;

/**
 * Which hosts a block's location names: the decision that lets an engine's
 * own delay scheduling (Spark's {@code spark.locality.wait}, YARN's) run tasks
 * where their input is in memory, CAVA's memory locality (section III-C)
 * without a scheduler of our own.
 *
 * <p>{@code hosts}: the hosts of MEM replicas; if none, of DISK replicas; if
 * none, the worker a pending migration will copy the block into (a task
 * placed there finds it in memory when it reads, Ignem/DYRS); if none, no
 * host. Never every worker: a block "local everywhere" makes delay
 * scheduling launch its task on the first free slot. {@code cachedHosts}: the
 * MEM hosts (HDFS centralized caching fills the same field, so engines that
 * already prefer cached replicas do so here too). One entry per host (two
 * workers on one host are one place to a scheduler), in the master's
 * locality order. {@code names} are the replicas' data addresses and
 * {@code topologyPaths} {@code /rack/address}, as HDFS gives them; the host
 * map renames every host returned, not addresses.
 *
 * <p>Deviation from HDFS: HDFS lists every replica in {@code hosts} whatever
 * its medium; listing DISK replicas beside MEM ones would make a disk-local
 * slot count as local, so they are left out while a MEM replica exists.
 */
public final class BlockLocations {
  private BlockLocations() {}

  /** Locations of {@code file}'s blocks overlapping {@code [start, start+len)} (every block: 0, Long.MAX_VALUE). */
  public static BlockLocation[] of(FileInfo file, long start, long len, HostMap hosts) {
    List<BlockLocation> out = new ArrayList<>();
    long end = len > Long.MAX_VALUE - start ? Long.MAX_VALUE : start + len;
    for (BlockInfo b : file.getBlocksList()) {
      long bEnd = b.getOffset() + b.getLength();
      if (bEnd > start && b.getOffset() < end) {
        out.add(of(b, hosts));
      }
    }
    return out.toArray(new BlockLocation[0]);
  }

  /** One block's location (see the class comment for the choice of hosts). */
  public static BlockLocation of(BlockInfo b, HostMap hostMap) {
    List<BlockReplica> mem = new ArrayList<>();
    List<BlockReplica> other = new ArrayList<>();
    for (BlockReplica r : b.getReplicasList()) {
      (r.getTier() == Tier.TIER_MEM ? mem : other).add(r);
    }
    List<BlockReplica> chosen = !mem.isEmpty() ? mem : other;
    if (chosen.isEmpty() && b.hasMigrationTarget()) {
      chosen = List.of(b.getMigrationTarget());
    }
    Map<String, BlockReplica> byHost = new LinkedHashMap<>();
    for (BlockReplica r : chosen) {
      byHost.putIfAbsent(hostMap.apply(r.getHost()), r);
    }
    int n = byHost.size();
    String[] names = new String[n];
    String[] hosts = new String[n];
    String[] topology = new String[n];
    String[] storageIds = new String[n];
    StorageType[] types = new StorageType[n];
    int i = 0;
    for (Map.Entry<String, BlockReplica> e : byHost.entrySet()) {
      BlockReplica r = e.getValue();
      hosts[i] = e.getKey();
      names[i] = r.getDataAddress();
      topology[i] = rackPath(r.getRack()) + "/" + r.getDataAddress();
      storageIds[i] = "thaw-worker-" + r.getWorkerId();
      // A migration target is not in memory yet: it is where the block will be.
      types[i] = r.getTier() == Tier.TIER_MEM && chosen == mem ? StorageType.RAM_DISK : StorageType.DISK;
      i++;
    }
    String[] cached = mem.stream().map(r -> hostMap.apply(r.getHost())).distinct().toArray(String[]::new);
    return new BlockLocation(
        names, hosts, cached, topology, storageIds, types, b.getOffset(), b.getLength(), false);
  }

  /** A rack as a network location ({@code /rack0}), as Hadoop's topology paths start. */
  static String rackPath(String rack) {
    if (rack == null || rack.isEmpty()) {
      return "/default-rack";
    }
    return rack.startsWith("/") ? rack : "/" + rack;
  }
}
