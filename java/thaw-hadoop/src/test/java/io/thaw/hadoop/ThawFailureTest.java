package io.thaw.hadoop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.security.AccessControlException;
import org.junit.Test;

/** A master that is down, and credentials: clear IOExceptions, quickly. */
public class ThawFailureTest {
  /** Generous for a loaded machine; a hang would be minutes. */
  private static final long QUICK_MS = 15_000;

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  private static long failsWithin(FileSystem fs, String what) {
    long t0 = System.currentTimeMillis();
    IOException e = assertThrows(IOException.class, () -> fs.getFileStatus(new org.apache.hadoop.fs.Path("/x")));
    long took = System.currentTimeMillis() - t0;
    assertTrue(what + ": took " + took + " ms: " + e, took < QUICK_MS);
    return took;
  }

  @Test
  public void aMasterThatIsDownIsAQuickConnectException() throws Exception {
    ThawCluster.binary();
    String master = "127.0.0.1:" + freePort();
    Configuration conf = new Configuration();
    try (FileSystem fs = FileSystem.newInstance(URI.create("thaw://" + master + "/"), conf)) {
      long t0 = System.currentTimeMillis();
      IOException e = assertThrows(IOException.class, () -> fs.getFileStatus(new org.apache.hadoop.fs.Path("/x")));
      long took = System.currentTimeMillis() - t0;
      assertTrue("took " + took + " ms", took < QUICK_MS);
      assertTrue(e.getClass().getName(), e instanceof java.net.ConnectException);
      assertTrue(e.getMessage(), e.getMessage().contains(master));
      System.out.println("master down: ConnectException after " + took + " ms: " + e.getMessage());
    }
  }

  @Test
  public void aMasterThatDiesIsAQuickIOException() throws Exception {
    ThawCluster c = ThawCluster.start(1);
    FileSystem fs = c.fs();
    try {
      try (FSDataOutputStream out = fs.create(new org.apache.hadoop.fs.Path("/before"))) {
        out.write(1);
      }
      c.close();
      long took = failsWithin(fs, "after the cluster stopped");
      System.out.println("master died: IOException after " + took + " ms");
    } finally {
      fs.close();
      c.close();
    }
  }

  private static void signal(ThawCluster c, String sig) throws Exception {
    Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(c.pid())).inheritIO().start();
    assertEquals(0, k.waitFor());
  }

  /**
   * A master that accepts connections but never answers (stopped, not dead):
   * the call fails once the connection's keep-alive pings go unanswered
   * (about 15 s), not never. Run on another thread so a regression fails
   * this test instead of hanging the build.
   */
  @Test
  public void aMasterThatHangsIsABoundedIOException() throws Exception {
    ThawCluster c = ThawCluster.start(1);
    FileSystem fs = c.fs();
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newSingleThreadExecutor();
    try {
      fs.mkdirs(new org.apache.hadoop.fs.Path("/warm"));
      signal(c, "STOP");
      long t0 = System.currentTimeMillis();
      java.util.concurrent.Future<FileStatusOrError> call =
          pool.submit(
              () -> {
                try {
                  return new FileStatusOrError(fs.getFileStatus(new org.apache.hadoop.fs.Path("/warm")), null);
                } catch (IOException e) {
                  return new FileStatusOrError(null, e);
                }
              });
      FileStatusOrError r;
      try {
        r = call.get(HANG_LIMIT_MS, java.util.concurrent.TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        throw new AssertionError("a call to a stopped master still hangs after " + HANG_LIMIT_MS + " ms");
      }
      long took = System.currentTimeMillis() - t0;
      assertTrue("a stopped master cannot answer: " + r.status, r.error != null);
      System.out.println("master stopped: " + r.error.getClass().getSimpleName() + " after " + took + " ms: " + r.error.getMessage());
    } finally {
      signal(c, "CONT");
      pool.shutdownNow();
      fs.close();
      c.close();
    }
  }

  /** Keep-alive detection (5 s + 5 s) with room for a loaded machine. */
  private static final long HANG_LIMIT_MS = 30_000;

  private static final class FileStatusOrError {
    final org.apache.hadoop.fs.FileStatus status;
    final IOException error;

    FileStatusOrError(org.apache.hadoop.fs.FileStatus status, IOException error) {
      this.status = status;
      this.error = error;
    }
  }

  @Test
  public void credentialsFromTheConfiguration() throws Exception {
    String bin = ThawCluster.binary();
    Path dir = Files.createTempDirectory("thaw-secret-");
    Path secret = dir.resolve("secret");
    Process p = new ProcessBuilder(bin, "auth", "secret", secret.toString()).redirectErrorStream(true).start();
    assertEquals(new String(p.getInputStream().readAllBytes()), 0, p.waitFor());
    try (ThawCluster c = ThawCluster.start(1, "--secret-file", secret.toString())) {
      // The cluster secret (the superuser's credentials) from fs.thaw.secret.file.
      Configuration admin = c.conf();
      admin.set(ThawConf.SECRET_FILE, secret.toString());
      try (FileSystem fs = FileSystem.newInstance(c.uri(), admin)) {
        try (FSDataOutputStream out = fs.create(new org.apache.hadoop.fs.Path("/secured/f"))) {
          out.write(new byte[] {1, 2, 3});
        }
        assertEquals(3, fs.getFileStatus(new org.apache.hadoop.fs.Path("/secured/f")).getLen());
      }
      // A token that is not one: refused, saying so, at once.
      Configuration forged = c.conf();
      forged.set(ThawConf.TOKEN, "not-a-token");
      try (FileSystem fs = FileSystem.newInstance(c.uri(), forged)) {
        long t0 = System.currentTimeMillis();
        IOException e =
            assertThrows(IOException.class, () -> fs.getFileStatus(new org.apache.hadoop.fs.Path("/secured/f")));
        assertTrue(e.getClass() + ": " + e.getMessage(), e instanceof AccessControlException);
        assertTrue(System.currentTimeMillis() - t0 < QUICK_MS);
        System.out.println("wrong token: " + e);
      }
      // A token the cluster signed, for another user, from fs.thaw.token.
      ProcessBuilder tb = new ProcessBuilder(bin, "--master", c.master, "auth", "token", "--user", "bob");
      tb.environment().put("THAW_SECRET_FILE", secret.toString());
      tb.redirectError(ProcessBuilder.Redirect.INHERIT);
      Process t = tb.start();
      String token = new String(t.getInputStream().readAllBytes()).trim();
      assertEquals("thaw auth token failed", 0, t.waitFor());
      Configuration bob = c.conf();
      bob.set(ThawConf.TOKEN, token);
      try (FileSystem fs = FileSystem.newInstance(c.uri(), bob)) {
        assertArrayEquals(new byte[] {1, 2, 3}, ThawFileSystemTest.readAll(fs, new org.apache.hadoop.fs.Path("/secured/f")));
        assertThrows(
            AccessControlException.class, () -> fs.delete(new org.apache.hadoop.fs.Path("/secured/f"), false));
      }
    }
  }
}
