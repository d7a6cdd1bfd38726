package io.thaw.spark;

import java.net.URI;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The files a physical plan's scans will read, after partition pruning: each
 * {@link FileSourceScanExec}'s file index listed with the scan's partition
 * filters, as the scan itself lists it ({@code selectedPartitions}), without
 * forcing the scan's own listing, so that the index can be refreshed after
 * the files are submitted and the scan's block locations then name the hosts
 * the migration places them on. Looks through adaptive plans (their input
 * plan), query stages, reused exchanges and subqueries.
 *
 * <p>Dynamic partition pruning filters are only known while the query runs
 * (the scan leaves them out of its listing too): for a scan that has them,
 * these are the files before that pruning, a superset, which is what can be
 * moved while the query waits.
 */
final class ScanFiles {
  /** The files' paths, each once, in plan order, and the file indexes listed. */
  final List<Path> files;

  final List<FileIndex> indexes;

  private ScanFiles(List<Path> files, List<FileIndex> indexes) {
    this.files = files;
    this.indexes = indexes;
  }

  /**
   * The plan's scanned files, of the scans with a root path {@code wanted}
   * accepts (the others are not listed: a catalog's index asks its metastore).
   */
  static ScanFiles of(SparkPlan plan, Predicate<URI> wanted) {
    Set<Path> files = new LinkedHashSet<>();
    Set<FileIndex> indexes = Collections.newSetFromMap(new IdentityHashMap<>());
    walk(plan, Collections.newSetFromMap(new IdentityHashMap<>()), files, indexes, wanted);
    return new ScanFiles(new ArrayList<>(files), new ArrayList<>(indexes));
  }

  private static void walk(
      SparkPlan p, Set<Object> seen, Set<Path> out, Set<FileIndex> indexes, Predicate<URI> wanted) {
    if (p == null || !seen.add(p)) {
      return;
    }
    if (p instanceof FileSourceScanExec scan
        && CollectionConverters.asJava(scan.relation().location().rootPaths()).stream()
            .anyMatch(r -> wanted.test(r.toUri()))) {
      FileIndex index = scan.relation().location();
      indexes.add(index);
      Seq<Expression> partitionFilters = staticOnly(scan.partitionFilters());
      Seq<Expression> dataFilters = staticOnly(scan.dataFilters());
      for (PartitionDirectory d : CollectionConverters.asJava(index.listFiles(partitionFilters, dataFilters))) {
        for (FileStatusWithMetadata f : CollectionConverters.asJava(d.files())) {
          out.add(f.getPath());
        }
      }
    } else if (p instanceof AdaptiveSparkPlanExec a) {
      walk(a.inputPlan(), seen, out, indexes, wanted);
    } else if (p instanceof QueryStageExec q) {
      walk(q.plan(), seen, out, indexes, wanted);
    } else if (p instanceof ReusedExchangeExec r) {
      walk(r.child(), seen, out, indexes, wanted);
    }
    for (SparkPlan c : CollectionConverters.asJava(p.children())) {
      walk(c, seen, out, indexes, wanted);
    }
    for (SparkPlan s : CollectionConverters.asJava(p.subqueries())) {
      walk(s, seen, out, indexes, wanted);
    }
  }

  /** The filters known at planning: those with no subquery in them (as the scan's own listing). */
  private static Seq<Expression> staticOnly(Seq<Expression> filters) {
    List<Expression> keep = new ArrayList<>();
    for (Expression e : CollectionConverters.asJava(filters)) {
      if (!(Boolean) e.exists(x -> x instanceof PlanExpression)) {
        keep.add(e);
      }
    }
    return CollectionConverters.asScala(keep).toList();
  }
}
