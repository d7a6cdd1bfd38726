package io.thaw.hadoop.contract;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.contract.AbstractContractContentSummaryTest;
import org.apache.hadoop.fs.contract.AbstractFSContract;

/** Hadoop's ContentSummary contract on thaw:// (contract/thaw.xml states what Thaw supports). */
public class TestThawContractContentSummary extends AbstractContractContentSummaryTest {
  @Override
  protected AbstractFSContract createContract(Configuration conf) {
    return new ThawContract(conf);
  }
}
