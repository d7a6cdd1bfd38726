package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractMkdirTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Mkdir contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractMkdir extends AbstractContractMkdirTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
