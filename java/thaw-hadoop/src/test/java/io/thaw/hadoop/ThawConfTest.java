package io.thaw.hadoop;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.Assume;
import org.junit.Test;

/** How a URI and a configuration become a client's settings (no cluster). */
public class ThawConfTest {
  @Test
  public void masterFromTheAuthorityThenTheConfiguration() throws Exception {
    Configuration conf = new Configuration(false);
    conf.set(ThawConf.MASTER, "conf-host:1");
    assertEquals("h:19998", ThawConf.master(URI.create("thaw://h:19998/x"), conf));
    assertEquals("conf-host:1", ThawConf.master(URI.create("thaw:///x"), conf));
  }

  @Test
  public void aGroupOfMastersFitsInTheAuthority() throws Exception {
    Path p = new Path("thaw://m1:19998,m2:19998,m3:19998/tables/t");
    assertEquals("m1:19998,m2:19998,m3:19998", p.toUri().getAuthority());
    assertEquals("/tables/t", p.toUri().getPath());
    assertEquals("m1:19998,m2:19998,m3:19998", ThawConf.master(p.toUri(), new Configuration(false)));
  }

  @Test
  public void noMasterAnywhereIsAClearError() {
    Assume.assumeTrue("THAW_MASTER is set", System.getenv("THAW_MASTER") == null);
    IOException e =
        assertThrows(IOException.class, () -> ThawConf.master(URI.create("thaw:///x"), new Configuration(false)));
    assertTrue(e.getMessage(), e.getMessage().contains(ThawConf.MASTER));
  }

  @Test
  public void jobFromTheConfigurationThenSpark() {
    Configuration conf = new Configuration(false);
    assertNull(ThawConf.job(conf));
    conf.set(ThawConf.SPARK_APP_ID, "app-20261128-0001");
    assertEquals("app-20261128-0001", ThawConf.job(conf));
    conf.set(ThawConf.JOB, "nightly");
    assertEquals("nightly", ThawConf.job(conf));
  }

  @Test
  public void writeTypesAreChecked() {
    assertEquals("must-cache", ThawConf.writeType(" MUST-CACHE ", "x"));
    assertEquals("replicated:2", ThawConf.writeType("replicated:2", "x"));
    assertThrows(IllegalArgumentException.class, () -> ThawConf.writeType("replicated", "x"));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ThawConf.writeType("cache-thru", ThawConf.WRITE_TYPE));
    assertTrue(e.getMessage(), e.getMessage().contains("cache-thru") && e.getMessage().contains("async-through"));
    assertThrows(IllegalArgumentException.class, () -> ThawConf.writeType("replicated:0", "x"));
  }

  @Test
  public void clientOptionsCarryCredentialsAndNoEmptyValues() {
    Configuration conf = new Configuration(false);
    conf.set(ThawConf.TOKEN, "tok");
    conf.set(ThawConf.SHORT_CIRCUIT, "false");
    assertEquals(
        "{master=m:1, short_circuit=false, token=tok}", ThawConf.clientOptions("m:1", conf).toString());
    conf.set(ThawConf.READ_CACHE, "ram");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ThawConf.clientOptions("m:1", conf));
    assertTrue(e.getMessage(), e.getMessage().contains(ThawConf.READ_CACHE));
  }

  @Test
  public void theServiceFileBindsTheScheme() throws Exception {
    assertEquals(ThawFileSystem.class, FileSystem.getFileSystemClass("thaw", new Configuration()));
  }
}
