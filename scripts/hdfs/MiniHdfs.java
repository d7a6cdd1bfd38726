// A real HDFS for Thaw's tests: Hadoop's MiniDFSCluster (a NameNode and DataNodes in
// one JVM, the same code as a production cluster) on loopback.
//
//   java -cp "LIB/*:CLASSES" MiniHdfs DIR NAMENODE_PORT DATANODES
//
// Prints "hdfs listening on hdfs://127.0.0.1:PORT" once it serves. Reads commands
// on stdin: "restart-namenode" (stop and start the NameNode on the same port and
// storage; answers "namenode restarted"), "stop-namenode", "start-namenode". Exits
// when stdin closes, so it never outlives the test that started it.
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        int port = Integer.parseInt(args[1]);
        int datanodes = Integer.parseInt(args[2]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, dir.getAbsolutePath());
        conf.set("dfs.permissions.enabled", "false");
        conf.set("dfs.replication", Integer.toString(Math.min(datanodes, 3)));
        conf.set("dfs.namenode.safemode.extension", "0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        // NNThroughputBenchmark's creates ask for 16-byte blocks (its remote
        // mode says to allow them; `thaw-bench meta-ops`).
        conf.set("dfs.namenode.fs-limits.min-block-size", "16");
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
            .nameNodePort(port)
            .numDataNodes(datanodes)
            .build();
        cluster.waitActive();
        System.out.println("hdfs listening on hdfs://127.0.0.1:" + cluster.getNameNodePort());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "restart-namenode":
                    cluster.restartNameNode(true);
                    System.out.println("namenode restarted");
                    break;
                case "stop-namenode":
                    cluster.shutdownNameNode(0);
                    System.out.println("namenode stopped");
                    break;
                case "start-namenode":
                    cluster.restartNameNode(true);
                    System.out.println("namenode started");
                    break;
                default:
                    System.out.println("unknown command: " + line);
            }
            System.out.flush();
        }
        cluster.shutdown();
    }
}
