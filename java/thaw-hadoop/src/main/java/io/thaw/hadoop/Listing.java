package io.thaw.hadoop;

import io.thaw.client.ThawException;
import io.thaw.proto.v1.FileInfo;
import io.thaw.proto.v1.ListStatusResponse;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.NoSuchElementException;
import java.util.function.Function;
import java.util.function.Predicate;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * A directory listed page by page ({@code fs.thaw.list.page} entries per
 * master call, in name order, each page starting after the last name seen),
 * so a directory of millions of files streams through a Spark driver instead
 * of arriving as one message. The first page is fetched at once, so a
 * missing path fails at the call that names it (as HDFS's iterators do).
 */
final class Listing<T> implements RemoteIterator<T> {
  /** One page: the entries after {@code startAfter} ("" from the first). */
  interface Pager {
    ListStatusResponse page(String startAfter) throws ThawException;
  }

  private final Pager pager;
  private final Function<FileInfo, T> convert;
  private final Predicate<FileInfo> keep;
  private final Function<ThawException, IOException> errors;
  private final Deque<T> buffered = new ArrayDeque<>();
  private String last = "";
  private boolean more = true;

  Listing(
      Pager pager,
      Function<FileInfo, T> convert,
      Predicate<FileInfo> keep,
      Function<ThawException, IOException> errors)
      throws IOException {
    this.pager = pager;
    this.convert = convert;
    this.keep = keep;
    this.errors = errors;
    fetch();
  }

  private void fetch() throws IOException {
    ListStatusResponse page;
    try {
      page = pager.page(last);
    } catch (ThawException e) {
      throw errors.apply(e);
    }
    for (FileInfo f : page.getEntriesList()) {
      if (keep.test(f)) {
        buffered.add(convert.apply(f));
      }
    }
    int n = page.getEntriesCount();
    more = page.getTruncated() && n > 0;
    if (n > 0) {
      last = page.getEntries(n - 1).getName();
    }
  }

  @Override
  public boolean hasNext() throws IOException {
    while (buffered.isEmpty() && more) {
      fetch();
    }
    return !buffered.isEmpty();
  }

  @Override
  public T next() throws IOException {
    if (!hasNext()) {
      throw new NoSuchElementException("no more entries");
    }
    return buffered.poll();
  }
}
