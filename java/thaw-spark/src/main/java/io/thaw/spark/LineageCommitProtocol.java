package io.thaw.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.internal.io.FileNameSpec;
import org.apache.spark.internal.io.HadoopMapReduceCommitProtocol;
import scala.Option;

/**
 * {@code spark.sql.sources.commitProtocolClass=io.thaw.spark.LineageCommitProtocol}:
 * each task writes its file directly at its final path,
 * {@code <dir>/part-<NNNNN><suffix>} (Spark's own name without the job's
 * random id, e.g. {@code part-00000-c000.csv}), instead of a temporary file
 * renamed at commit. A lineage (Tachyon, section 2.4) names its output files
 * before the job runs, and Thaw ties a file to its lineage when it is created
 * at one of those paths: with Spark's default protocol, files are created
 * under {@code _temporary} with random names and renamed, and no lineage could
 * name them. {@code thaw-spark-submit} sets this protocol.
 *
 * <p>Safe on Thaw because a task's file only becomes visible when complete
 * (the writer closes it), and a failed attempt's file is deleted before a
 * retry writes the same path. Not for speculative execution (two attempts of
 * one task would write one path) nor dynamic partition overwrite, which are
 * refused.
 *
 * <p>In a rerun by Thaw's workflow manager ({@code THAW_RECOVER_LINEAGE} set),
 * an overwrite-mode write does not delete the existing output: the rerun's
 * writes rebuild the lineage's lost files in place (same file ids), which
 * deleting them first would defeat.
 */
public class LineageCommitProtocol extends HadoopMapReduceCommitProtocol {
  private static final long serialVersionUID = 1L;

  private final String outputPath;
  /** Files this task attempt created (deleted if it aborts). */
  private transient List<Path> created;

  public LineageCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
    super(jobId, path, false);
    if (dynamicPartitionOverwrite) {
      throw new UnsupportedOperationException(
          "io.thaw.spark.LineageCommitProtocol writes files in place: dynamic partition overwrite "
              + "(spark.sql.sources.partitionOverwriteMode=dynamic) is not supported with it");
    }
    this.outputPath = path;
  }

  public LineageCommitProtocol(String jobId, String path) {
    this(jobId, path, false);
  }

  /** The file name a task writes: Spark's, without the job's random id. */
  static String fileName(int split, String prefix, String suffix) {
    return String.format("%spart-%05d%s", prefix, split, suffix);
  }

  @Override
  public void setupJob(JobContext ctx) {
    SparkEnv env = SparkEnv.get();
    if (env != null && env.conf().getBoolean("spark.speculation", false)) {
      throw new UnsupportedOperationException(
          "io.thaw.spark.LineageCommitProtocol writes files in place: set spark.speculation=false");
    }
    super.setupJob(ctx);
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext ctx, Option<String> dir, FileNameSpec spec) {
    Path base = dir.isDefined() ? new Path(outputPath, dir.get()) : new Path(outputPath);
    int split = ctx.getTaskAttemptID().getTaskID().getId();
    Path file = new Path(base, fileName(split, spec.prefix(), spec.suffix()));
    if (created == null) {
      created = new ArrayList<>();
    }
    created.add(file);
    return file.toString();
  }

  @Override
  public String newTaskTempFile(TaskAttemptContext ctx, Option<String> dir, String ext) {
    return newTaskTempFile(ctx, dir, new FileNameSpec("", ext));
  }

  @Override
  public void abortTask(TaskAttemptContext ctx) {
    super.abortTask(ctx);
    if (created != null) {
      for (Path p : created) {
        try {
          p.getFileSystem(ctx.getConfiguration()).delete(p, false);
        } catch (IOException e) {
          // The retry's create reports it if the file is still there.
        }
      }
      created.clear();
    }
  }

  @Override
  public boolean deleteWithJob(FileSystem fs, Path path, boolean recursive) {
    if (rerun()) {
      return true;
    }
    return super.deleteWithJob(fs, path, recursive);
  }

  /** Whether this is a rerun by Thaw's workflow manager (which sets THAW_RECOVER_LINEAGE). */
  static boolean rerun() {
    String l = System.getenv("THAW_RECOVER_LINEAGE");
    return l != null && !l.isEmpty() && !l.equals("0");
  }
}
