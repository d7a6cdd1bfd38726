package io.thaw.hadoop;

import java.io.IOException;
import java.util.Set;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathIOException;

/**
 * {@code fs.createFile(path)}: Hadoop's create options plus Thaw's write type
 * for this one file, {@code .opt("fs.thaw.write.type", "must-cache")} (or
 * {@code must(...)}), so an engine writes intermediate data to memory only
 * and its results through to the under-store from one file system. Other
 * mandatory keys are rejected, as Hadoop's builders do.
 */
final class ThawOutputStreamBuilder extends FSDataOutputStreamBuilder<FSDataOutputStream, ThawOutputStreamBuilder> {
  private final ThawFileSystem fs;

  ThawOutputStreamBuilder(ThawFileSystem fs, Path path) {
    super(fs, path);
    this.fs = fs;
  }

  @Override
  public ThawOutputStreamBuilder getThisBuilder() {
    return this;
  }

  @Override
  public FSDataOutputStream build() throws IOException {
    rejectUnknownMandatoryKeys(Set.of(ThawConf.WRITE_TYPE), " for " + getPath());
    String type = getOptions().get(ThawConf.WRITE_TYPE);
    String writeType =
        type == null ? fs.defaultWriteType() : ThawConf.writeType(type, "createFile(" + getPath() + ")");
    if (getFlags().contains(CreateFlag.APPEND)) {
      return fs.append(getPath(), getBufferSize(), getProgress());
    }
    if (!getFlags().contains(CreateFlag.CREATE) && !getFlags().contains(CreateFlag.OVERWRITE)) {
      throw new PathIOException(getPath().toString(), "Must specify either create, overwrite or append");
    }
    return fs.create(
        getPath(),
        getPermission(),
        getFlags().contains(CreateFlag.OVERWRITE),
        isRecursive(),
        getBlockSize(),
        writeType);
  }
}
