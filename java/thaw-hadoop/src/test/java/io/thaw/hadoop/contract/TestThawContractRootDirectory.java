package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractRootDirectoryTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's RootDirectory contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractRootDirectory extends AbstractContractRootDirectoryTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
