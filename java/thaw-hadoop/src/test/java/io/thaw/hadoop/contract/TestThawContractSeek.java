package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractSeekTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Seek contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractSeek extends AbstractContractSeekTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
