package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractConcatTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Concat contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractConcat extends AbstractContractConcatTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
