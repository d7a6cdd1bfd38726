package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractGetFileStatusTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's GetFileStatus contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractGetFileStatus extends AbstractContractGetFileStatusTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
