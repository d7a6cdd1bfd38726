package io.thaw.hadoop;

import io.thaw.client.ThawClient;
import io.thaw.client.ThawException;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The JVM's Thaw clients, one per (master, credentials, options, job), shared
 * by every {@code ThawFileSystem} and {@code FileContext} that asks with the
 * same settings; Hadoop makes a FileSystem per user and URI (and more when
 * its cache is off), and each must not open its own connections. A client
 * for a job is made from the job-less client of the same cluster
 * ({@link ThawClient#withJob}), so every job of a JVM shares one set of
 * connections too. The native runtime behind them is already one per JVM.
 *
 * <p>Counted references: {@link #acquire} by each file system's
 * initialize, {@link #release} by its close; a client is freed when the last
 * holder lets go, so a long-lived JVM that moves between clusters does not
 * keep every connection it ever made.
 */
final class ClientCache {
  private ClientCache() {}

  /** A client handed out, with the key to give back. */
  static final class Lease {
    final ThawClient client;
    private final Map<String, String> key;

    private Lease(ThawClient client, Map<String, String> key) {
      this.client = client;
      this.key = key;
    }
  }

  private static final class Entry {
    final ThawClient client;
    int refs;

    Entry(ThawClient client) {
      this.client = client;
    }
  }

  private static final Map<Map<String, String>, Entry> CLIENTS = new HashMap<>();

  /** The shared client for {@code options} (without a job) and {@code job} (null: none). */
  static synchronized Lease acquire(Map<String, String> options, String job) throws ThawException {
    Map<String, String> key = new TreeMap<>(options);
    key.remove("job");
    if (job != null) {
      key.put("job", job);
    }
    Entry e = CLIENTS.get(key);
    if (e == null) {
      if (job == null) {
        e = new Entry(ThawClient.connect(key));
      } else {
        Lease base = acquire(options, null);
        try {
          e = new Entry(base.client.withJob(job));
        } catch (ThawException ex) {
          release(base);
          throw ex;
        }
      }
      CLIENTS.put(key, e);
    }
    e.refs++;
    return new Lease(e.client, key);
  }

  /** Gives a client back; the last release frees it (and its job-less base, for a job's). */
  static synchronized void release(Lease lease) {
    Entry e = CLIENTS.get(lease.key);
    if (e == null || e.client != lease.client) {
      return;
    }
    if (--e.refs > 0) {
      return;
    }
    CLIENTS.remove(lease.key);
    e.client.close();
    if (lease.key.containsKey("job")) {
      Map<String, String> base = new TreeMap<>(lease.key);
      base.remove("job");
      Entry b = CLIENTS.get(base);
      if (b != null) {
        release(new Lease(b.client, base));
      }
    }
  }

  /** Clients alive now (for tests: one per distinct settings, whatever the number of file systems). */
  static synchronized int size() {
    return CLIENTS.size();
  }
}
