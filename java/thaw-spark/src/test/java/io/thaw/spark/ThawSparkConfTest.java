package io.thaw.spark;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.net.URI;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkConf;
import org.junit.Test;

/** The integration's decisions that need no cluster: paths, job ids, origins, file names. */
public class ThawSparkConfTest {
  private static ThawSparkConf conf(String... kv) {
    SparkConf c = new SparkConf(false);
    for (int i = 0; i < kv.length; i += 2) {
      c.set(kv[i], kv[i + 1]);
    }
    return new ThawSparkConf(c, new Configuration(false));
  }

  @Test
  public void thawUrisAreSubmittedWithTheirAuthorityOtherSchemesAreNot() {
    ThawSparkConf c = conf();
    assertArrayEquals(new String[] {"m:1", "/t/a.parquet"}, c.thawPath(URI.create("thaw://m:1/t/a.parquet")));
    assertArrayEquals(new String[] {null, "/t/a"}, c.thawPath(URI.create("thaw:///t/a")));
    assertNull(c.thawPath(URI.create("file:///t/a")));
    assertNull(c.thawPath(URI.create("s3a://b/t/a")));
  }

  @Test
  public void localFilesMapOntoThawsRootOnlyUnderIt() {
    ThawSparkConf c = conf(ThawSparkConf.SCHEMES, "thaw,file", ThawSparkConf.LOCAL_ROOT, "/data/ufs/");
    assertArrayEquals(new String[] {null, "/t/p=1/a"}, c.thawPath(URI.create("file:/data/ufs/t/p=1/a")));
    assertNull(c.thawPath(URI.create("file:/data/ufs2/a")));
    assertThrows(IllegalArgumentException.class, () -> conf(ThawSparkConf.SCHEMES, "file"));
    assertThrows(IllegalArgumentException.class, () -> conf(ThawSparkConf.LEASE_MS, "10"));
  }

  @Test
  public void clientOptionsComeFromSparkThenHadoopKeys() {
    SparkConf s = new SparkConf(false).set("spark.thaw.token", "t1");
    Configuration h = new Configuration(false);
    h.set("fs.thaw.master", "h:2");
    h.set("fs.thaw.token", "t2");
    ThawSparkConf c = new ThawSparkConf(s, h);
    assertEquals("h:2", c.clientOptions.get("master"));
    assertEquals("t1", c.clientOptions.get("token"));
  }

  @Test
  public void jobIdsNameTheApplicationAndTheQueryOrJob() {
    ThawSparkConf c = conf(ThawSparkConf.JOB_PREFIX, "etl-");
    assertEquals("etl-app-1-7", c.queryJob("app-1", 7));
    assertEquals("etl-app-1-job3", c.rddJob("app-1", 3));
  }

  @Test
  public void originsFitTheMastersLimits() {
    assertEquals("spark a query 1 select x", DriverJobs.origin("spark a query 1 select\n  x"));
    String long_ = "spark a query 1 " + "é".repeat(200);
    String o = DriverJobs.origin(long_);
    assertTrue(o.getBytes(StandardCharsets.UTF_8).length <= 200);
    assertTrue(o.endsWith("..."));
  }

  @Test
  public void descriptionsFallBackToTheFilesCommonDirectory() {
    assertEquals("/t", ThawSparkExtension.commonDir("/t/p=1", "/t/p=2"));
    assertEquals("/", ThawSparkExtension.commonDir("/a", "/b"));
  }

  @Test
  public void lineageOutputsAreSparksNamesWithoutTheJobsRandomId() {
    assertEquals("part-00003-c000.csv", LineageCommitProtocol.fileName(3, "", "-c000.csv"));
  }
}
