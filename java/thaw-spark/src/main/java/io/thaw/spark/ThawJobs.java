package io.thaw.spark;

import io.thaw.client.ThawClient;
import io.thaw.client.ThawException;
import io.thaw.proto.v1.JobInfo;
import io.thaw.proto.v1.ListJobsResponse;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Thaw jobs one Spark driver holds: each submitted once with its inputs
 * (Ignem/DYRS: "migrate right after query compilation"; Scheduled caching's
 * prefetch hint), its lease renewed while it runs, released when it ends
 * (the do-not-evict hint's end). Eviction is explicit: blocks stay in memory
 * until the query or job that asked for them ends, however it ends.
 *
 * <p>A job's inputs may grow (a query's subqueries are planned after it, and
 * AQE plans stages late): each call submits only the paths not submitted yet,
 * to the same job. A job the master forgot (it restarted, or a lease ran out
 * while the driver was paused) is submitted again with all its paths. Thaw
 * failing never fails the query: it is a hint, logged as a warning.
 */
final class ThawJobs implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ThawJobs.class);

  /** One job at one cluster (a URI authority, or "" for the configured master). */
  private static final class Job {
    final String cluster;
    final String id;
    final String origin;
    final Set<String> paths = new LinkedHashSet<>();

    Job(String cluster, String id, String origin) {
      this.cluster = cluster;
      this.id = id;
      this.origin = origin;
    }
  }

  private final ThawSparkConf conf;
  private final Map<String, ThawClient> clients = new HashMap<>();
  /** Live jobs by (cluster, id). */
  private final Map<List<String>, Job> jobs = new HashMap<>();
  /** Jobs released lately: a late call for one (an AQE stage planned as the query fails) submits nothing. */
  private final Set<String> ended = new LinkedHashSet<>();
  private static final int ENDED_KEEP = 10_000;
  private final ScheduledExecutorService renewer;

  ThawJobs(ThawSparkConf conf) {
    this.conf = conf;
    renewer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "thaw-job-lease-renewer");
              t.setDaemon(true);
              return t;
            });
    long every = Math.max(200, conf.leaseMs / 3);
    renewer.scheduleWithFixedDelay(this::renew, every, every, TimeUnit.MILLISECONDS);
  }

  private ThawClient client(String cluster) throws ThawException {
    synchronized (clients) {
      ThawClient c = clients.get(cluster);
      if (c == null) {
        c = conf.connect(cluster);
        clients.put(cluster, c);
      }
      return c;
    }
  }

  /**
   * Submits {@code paths} (by cluster: {authority or null, path} pairs) to job
   * {@code id}, those not submitted yet. Returns how many paths were new.
   */
  int submit(String id, String origin, List<String[]> paths) {
    Map<String, List<String>> fresh = new HashMap<>();
    synchronized (jobs) {
      if (ended.contains(id)) {
        return 0;
      }
      for (String[] p : paths) {
        String cluster = p[0] == null ? "" : p[0];
        Job j = jobs.computeIfAbsent(List.of(cluster, id), k -> new Job(cluster, id, origin));
        if (j.paths.add(p[1])) {
          fresh.computeIfAbsent(cluster, k -> new ArrayList<>()).add(p[1]);
        }
      }
    }
    int n = 0;
    for (Map.Entry<String, List<String>> e : fresh.entrySet()) {
      try {
        client(e.getKey()).migrate(id, e.getValue(), "explicit", conf.leaseMs, origin);
        n += e.getValue().size();
        LOG.info("Thaw job {} submitted {} input path(s) ({})", id, e.getValue().size(), origin);
      } catch (ThawException ex) {
        LOG.warn("Thaw job {}: migrating its inputs failed ({}): the query reads them as they are", id, ex.getMessage());
      }
    }
    return n;
  }

  /**
   * Waits up to {@code ms} until the master has bound every block of job
   * {@code id} it can to a worker (none pending, but those waiting for memory).
   */
  void awaitBound(String id, long ms) {
    List<String> clusters = new ArrayList<>();
    synchronized (jobs) {
      jobs.values().stream().filter(j -> j.id.equals(id)).forEach(j -> clusters.add(j.cluster));
    }
    long deadline = System.nanoTime() + ms * 1_000_000;
    try {
      for (String cluster : clusters) {
        ThawClient c = client(cluster);
        while (System.nanoTime() < deadline) {
          ListJobsResponse r = c.jobs(id);
          if (r.getJobsCount() == 0) {
            break;
          }
          JobInfo j = r.getJobs(0);
          if (j.getBlocksPending() <= j.getBlocksWaitingForMemory()) {
            break;
          }
          Thread.sleep(20);
        }
      }
    } catch (ThawException e) {
      LOG.warn("Thaw job {}: cannot see where its blocks go ({})", id, e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Releases job {@code id} everywhere (its query ended or failed); again: nothing. */
  void release(String id) {
    List<Job> gone = new ArrayList<>();
    synchronized (jobs) {
      ended.add(id);
      if (ended.size() > ENDED_KEEP) {
        ended.remove(ended.iterator().next());
      }
      jobs.entrySet().removeIf(
          e -> {
            if (e.getKey().get(1).equals(id)) {
              gone.add(e.getValue());
              return true;
            }
            return false;
          });
    }
    for (Job j : gone) {
      try {
        client(j.cluster).evict(j.id, List.of());
        LOG.info("Thaw job {} released", j.id);
      } catch (ThawException ex) {
        // Unreleased, its lease runs out: the master releases it then.
        LOG.warn("Thaw job {}: release failed ({}); its lease will end it", j.id, ex.getMessage());
      }
    }
  }

  private void renew() {
    Map<String, List<Job>> byCluster = new HashMap<>();
    synchronized (jobs) {
      for (Job j : jobs.values()) {
        byCluster.computeIfAbsent(j.cluster, k -> new ArrayList<>()).add(j);
      }
    }
    for (Map.Entry<String, List<Job>> e : byCluster.entrySet()) {
      List<String> ids = new ArrayList<>();
      e.getValue().forEach(j -> ids.add(j.id));
      try {
        ThawClient c = client(e.getKey());
        for (String unknown : c.renewLeases(ids)) {
          Job j;
          List<String> paths;
          synchronized (jobs) {
            j = jobs.get(List.of(e.getKey(), unknown));
            paths = j == null ? List.of() : new ArrayList<>(j.paths);
          }
          if (j != null && !paths.isEmpty()) {
            c.migrate(j.id, paths, "explicit", conf.leaseMs, j.origin);
            LOG.info("Thaw job {} was unknown to the master: submitted again", j.id);
          }
        }
      } catch (ThawException | RuntimeException ex) {
        LOG.warn("renewing Thaw job leases failed: {}", ex.getMessage());
      }
    }
  }

  /** Releases every live job and closes the clients (the application ends). */
  @Override
  public void close() {
    renewer.shutdownNow();
    List<String> ids = new ArrayList<>();
    synchronized (jobs) {
      jobs.values().forEach(j -> ids.add(j.id));
    }
    ids.forEach(this::release);
    synchronized (clients) {
      clients.values().forEach(ThawClient::close);
      clients.clear();
    }
  }
}
