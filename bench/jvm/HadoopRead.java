import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * One JVM reading whole files through Hadoop's {@code FileSystem.open}, as an
 * engine's task does: {@code read(byte[])} of {@code --buffer} bytes until the
 * end. Prints one JSON line per file read: its URI, bytes, seconds, MiB/s.
 *
 * <pre>
 *   java -cp CLASSPATH HadoopRead [--buffer 4194304] [--conf key=value]... URI...
 * </pre>
 *
 * A {@code raw:///path} URI reads through Hadoop's {@code RawLocalFileSystem}
 * (no checksums, no buffering of its own): the local baseline. Other URIs go
 * to whatever FileSystem their scheme names on the classpath
 * ({@code thaw://}, {@code alluxio://}). Part of the evaluation harness
 * ({@code thaw_bench.scripts.hadoop_read}).
 */
public final class HadoopRead {
  public static void main(String[] args) throws Exception {
    int buffer = 4 << 20;
    Configuration conf = new Configuration();
    List<String> uris = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--buffer" -> buffer = Integer.parseInt(args[++i]);
        case "--conf" -> {
          String[] kv = args[++i].split("=", 2);
          conf.set(kv[0], kv[1]);
        }
        default -> uris.add(args[i]);
      }
    }
    byte[] buf = new byte[buffer];
    for (String u : uris) {
      URI uri = URI.create(u);
      FileSystem fs;
      Path path;
      if ("raw".equals(uri.getScheme())) {
        RawLocalFileSystem raw = new RawLocalFileSystem();
        raw.initialize(URI.create("file:///"), conf);
        fs = raw;
        path = new Path(uri.getPath());
      } else {
        fs = FileSystem.get(uri, conf);
        path = new Path(uri);
      }
      long start = System.nanoTime();
      long total = 0;
      try (FSDataInputStream in = fs.open(path, buffer)) {
        int n;
        while ((n = in.read(buf, 0, buf.length)) > 0) {
          total += n;
        }
      }
      double secs = (System.nanoTime() - start) / 1e9;
      System.out.printf(
          "{\"uri\": \"%s\", \"bytes\": %d, \"seconds\": %.6f, \"mib_s\": %.1f}%n",
          u, total, secs, total / secs / (1 << 20));
    }
    System.exit(0);
  }
}
