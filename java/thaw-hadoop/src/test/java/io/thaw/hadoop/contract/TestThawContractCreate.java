package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractCreateTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Create contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractCreate extends AbstractContractCreateTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
