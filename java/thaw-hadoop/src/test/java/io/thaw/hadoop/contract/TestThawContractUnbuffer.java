package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractUnbufferTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's Unbuffer contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractUnbuffer extends AbstractContractUnbufferTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
