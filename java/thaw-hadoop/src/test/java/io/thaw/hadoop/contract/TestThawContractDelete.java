package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractDeleteTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Delete contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractDelete extends AbstractContractDeleteTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
