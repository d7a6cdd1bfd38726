package io.thaw.hadoop;

import io.thaw.client.ThawClient;
import io.thaw.proto.v1.WorkerInfo;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.Assume;

/**
 * A real Thaw cluster for tests: {@code thaw local} from {@code -Dthaw.bin}
 * as a child process (master and workers, MEM tiers in /dev/shm, the
 * under-store in a temporary directory), as python/thaw's LocalCluster
 * starts it: on a free port ({@code --port 0}, the address read from its
 * log), ready once every worker is alive, stopped by {@link #close} and in
 * any case when this JVM dies ({@code --exit-with-stdin}). Tests skip with a
 * message saying how to run them when {@code thaw.bin} is not set.
 */
public final class ThawCluster implements AutoCloseable {
  private static ThawCluster shared;

  private final Process process;
  private final Path tmp;
  private final Path log;
  /** The master's address (host:port). */
  public final String master;
  /** The under-store directory, mounted at '/'. */
  public final Path ufs;

  private ThawCluster(Process process, Path tmp, Path log, String master, Path ufs) {
    this.process = process;
    this.tmp = tmp;
    this.log = log;
    this.master = master;
    this.ufs = ufs;
  }

  /** The {@code thaw} binary, or a skip of the calling test saying how to give it. */
  public static String binary() {
    String bin = System.getProperty("thaw.bin", "");
    Assume.assumeTrue(
        "Thaw cluster tests skipped: run with -Dthaw.bin=PATH/TO/thaw (scripts/java.sh test does)",
        !bin.isEmpty() && !bin.startsWith("${"));
    Assume.assumeTrue("thaw.bin " + bin + " is not an executable", new File(bin).canExecute());
    return bin;
  }

  /**
   * One cluster for every test of this JVM that needs nothing special (the
   * contract tests), started on first use and stopped at exit.
   */
  public static synchronized ThawCluster shared() throws IOException {
    if (shared == null || !shared.process.isAlive()) {
      shared = start(2);
      ThawCluster c = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(c::close));
    }
    return shared;
  }

  /** A cluster of {@code workers} workers, with extra {@code thaw local} arguments. */
  public static ThawCluster start(int workers, String... extra) throws IOException {
    String bin = binary();
    Path tmp = Files.createTempDirectory("thaw-java-test-");
    Path ufs = Files.createDirectories(tmp.resolve("ufs"));
    Path log = tmp.resolve("cluster.log");
    List<String> cmd = new ArrayList<>(List.of(
        bin, "local",
        "--ufs", ufs.toString(),
        "--workers", Integer.toString(workers),
        "--port", "0",
        "--mem-capacity", "256MiB",
        "--disk-capacity", "512MiB",
        "--state-dir", tmp.resolve("state").toString(),
        "--heartbeat-ms", "200",
        "--exit-with-stdin"));
    cmd.addAll(List.of(extra));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    // Keep the child's credentials our own choice: tests set them per client.
    pb.environment().remove("THAW_TOKEN");
    pb.environment().remove("THAW_TOKEN_FILE");
    pb.environment().remove("THAW_SECRET_FILE");
    Process p = pb.start();
    try {
      String master = waitForMaster(p, log, 60_000);
      ThawCluster c = new ThawCluster(p, tmp, log, master, ufs);
      c.waitForWorkers(workers, 60_000, extra);
      return c;
    } catch (IOException | RuntimeException e) {
      p.destroyForcibly();
      throw e;
    }
  }

  private static String waitForMaster(Process p, Path log, long timeoutMs) throws IOException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    String prefix = "thaw local: master at ";
    while (System.currentTimeMillis() < deadline) {
      if (!p.isAlive()) {
        throw new IOException("thaw local exited with " + p.exitValue() + ":\n" + tail(log));
      }
      for (String line : Files.readAllLines(log, StandardCharsets.UTF_8)) {
        if (line.startsWith(prefix)) {
          return line.substring(prefix.length()).split(";")[0].trim();
        }
      }
      sleep(20);
    }
    throw new IOException("thaw local did not print its master address in " + timeoutMs + " ms:\n" + tail(log));
  }

  private void waitForWorkers(int n, long timeoutMs, String[] extra) throws IOException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    Map<String, String> options = new java.util.TreeMap<>(Map.of("master", master));
    for (int i = 0; i + 1 < extra.length; i++) {
      if (extra[i].equals("--secret-file")) {
        options.put("secret_file", extra[i + 1]);
      }
    }
    try (ThawClient c = ThawClient.connect(options)) {
      while (System.currentTimeMillis() < deadline) {
        if (!process.isAlive()) {
          throw new IOException("thaw local exited with " + process.exitValue() + ":\n" + tail(log));
        }
        try {
          long alive = c.clusterStatus().getWorkersList().stream().filter(WorkerInfo::getAlive).count();
          if (alive >= n) {
            return;
          }
        } catch (IOException e) {
          // not serving yet
        }
        sleep(50);
      }
    }
    throw new IOException(n + " workers did not register in " + timeoutMs + " ms:\n" + tail(log));
  }

  /** A Hadoop configuration naming this cluster ({@code fs.thaw.master}), file system cache off. */
  public Configuration conf() {
    Configuration conf = new Configuration();
    conf.set(ThawConf.MASTER, master);
    conf.setBoolean("fs.thaw.impl.disable.cache", true);
    return conf;
  }

  public URI uri() {
    return URI.create("thaw://" + master + "/");
  }

  /** A new (uncached) file system on this cluster; close it. */
  public FileSystem fs() throws IOException {
    return FileSystem.newInstance(uri(), conf());
  }

  /** A native client on this cluster (for the CLI's operations: migrate, jobs). */
  public ThawClient client() throws IOException {
    return ThawClient.connect(Map.of("master", master));
  }

  /** Runs the CLI against this cluster; its output, or an IOException with it. */
  public String cli(String... args) throws IOException {
    List<String> cmd = new ArrayList<>(List.of(binary(), "--master", master));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    try {
      if (p.waitFor() != 0) {
        throw new IOException(String.join(" ", cmd) + " failed:\n" + out);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
    return out;
  }

  /** The process id of {@code thaw local} (master and workers in one process). */
  public long pid() {
    return process.pid();
  }

  public String logTail() {
    return tail(log);
  }

  private static String tail(Path log) {
    try {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** Stops the cluster (SIGTERM, then SIGKILL after 15 s) and removes its files. */
  @Override
  public void close() {
    process.destroy();
    try {
      if (!process.waitFor(15, java.util.concurrent.TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    try (Stream<Path> s = Files.walk(tmp)) {
      s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // best effort: a temporary directory
    }
  }
}
