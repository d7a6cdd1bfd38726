#!/usr/bin/env bash
# Makes a real HDFS available to the tests: Hadoop's MiniDFSCluster (the shaded
# hadoop-client-minicluster 3.4.1 jars from Maven Central) and MiniHdfs.java, our
# launcher, compiled into $THAW_HDFS_HOME (default ~/.cache/thaw/hdfs-3.4.1), with
# reload4j, the log4j 1 API that Hadoop's NNThroughputBenchmark needs
# (`thaw-bench meta-ops` runs it beside Thaw).
# Installs a JDK and Maven with apt when they are missing and we are root; when
# they cannot be had, says so and exits 0 (the HDFS tests then skip, saying why).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
home="${THAW_HDFS_HOME:-$HOME/.cache/thaw/hdfs-3.4.1}"
if [ -f "$home/classes/MiniHdfs.class" ] && [ "$home/classes/MiniHdfs.class" -nt "$here/MiniHdfs.java" ] \
  && ls "$home"/lib/reload4j-*.jar >/dev/null 2>&1; then
  exit 0
fi
if ! "$here/../ensure-jdk.sh"; then
  echo "hdfs: the HDFS tests will skip" >&2
  exit 0
fi
mkdir -p "$home/lib" "$home/classes"
cat > "$home/pom.xml" <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>thaw</groupId><artifactId>minihdfs</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-minicluster</artifactId><version>3.4.1</version></dependency>
<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-api</artifactId><version>3.4.1</version></dependency>
<dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-runtime</artifactId><version>3.4.1</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
<dependency><groupId>ch.qos.reload4j</groupId><artifactId>reload4j</artifactId><version>1.2.22</version></dependency>
</dependencies></project>
POM
echo "hdfs: resolving hadoop-client-minicluster 3.4.1 (Maven Central, ~90 MB once)" >&2
(cd "$home" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$home/lib")
javac -d "$home/classes" -cp "$home/lib/*" "$here/MiniHdfs.java"
echo "hdfs: MiniHdfs ready in $home" >&2
