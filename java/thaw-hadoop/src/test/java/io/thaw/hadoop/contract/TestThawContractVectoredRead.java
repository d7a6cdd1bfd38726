package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractVectoredReadTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's vectored-read contract on thaw://, with direct and heap buffers. */
public class TestThawContractVectoredRead extends AbstractContractVectoredReadTest {
  public TestThawContractVectoredRead(String bufferType) {
    super(bufferType);
  }

  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
