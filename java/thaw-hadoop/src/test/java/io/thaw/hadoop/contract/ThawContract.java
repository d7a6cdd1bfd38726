package io.thaw.hadoop.contract;

import io.thaw.hadoop.ThawCluster;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/**
 * Hadoop's FileSystem contract bound to {@code thaw://} on the JVM's shared
 * test cluster, with Thaw's semantics stated in contract/thaw.xml.
 */
public class ThawContract extends AbstractFSContract {
  public static final String CONTRACT_XML = "contract/thaw.xml";

  private FileSystem fs;

  public ThawContract(Configuration conf) {
    super(conf);
    addConfResource(CONTRACT_XML);
  }

  @Override
  public void init() throws IOException {
    super.init();
    ThawCluster cluster = ThawCluster.shared();
    getConf().set("fs.thaw.master", cluster.master);
    fs = FileSystem.get(cluster.uri(), getConf());
  }

  @Override
  public FileSystem getTestFileSystem() {
    return fs;
  }

  @Override
  public String getScheme() {
    return "thaw";
  }

  @Override
  public Path getTestPath() {
    return new Path("/test");
  }
}
