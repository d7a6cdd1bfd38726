package io.thaw.hadoop;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * {@code thaw://} for {@link org.apache.hadoop.fs.FileContext}
 * ({@code fs.AbstractFileSystem.thaw.impl = io.thaw.hadoop.Thaw}): the same
 * {@link ThawFileSystem} behind Hadoop's other API, as HDFS, S3A and ABFS
 * provide theirs. No authority is needed: a URI without one uses
 * {@code fs.thaw.master}.
 */
public class Thaw extends DelegateToFileSystem {
  public Thaw(URI theUri, Configuration conf) throws IOException, URISyntaxException {
    super(theUri, new ThawFileSystem(), conf, ThawFileSystem.SCHEME, false);
  }

  /** Thaw has no well-known port: a master's address always names one. */
  @Override
  public int getUriDefaultPort() {
    return -1;
  }
}
