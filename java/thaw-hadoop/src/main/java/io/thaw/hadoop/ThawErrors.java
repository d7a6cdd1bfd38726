package io.thaw.hadoop;

import io.thaw.client.ThawException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.ParentNotDirectoryException;
import org.apache.hadoop.fs.PathIOException;
import org.apache.hadoop.fs.PathIsDirectoryException;
import org.apache.hadoop.fs.PathIsNotEmptyDirectoryException;
import org.apache.hadoop.security.AccessControlException;

/**
 * Thaw's error kinds as the exceptions Hadoop's callers catch (the contract
 * in Hadoop's filesystem specification, as HDFS raises them): a missing path
 * is a FileNotFoundException, an existing one FileAlreadyExistsException, and
 * so on. Every translated exception names the path (or the master, for a
 * cluster that cannot be reached) and keeps the ThawException as its cause.
 */
final class ThawErrors {
  private ThawErrors() {}

  /** {@code e} as Hadoop's exception for an operation on {@code path} of the cluster at {@code master}. */
  static IOException translate(ThawException e, String path, String master) {
    String msg = e.getMessage();
    IOException out;
    switch (e.kind()) {
      case "not-found":
        out = new FileNotFoundException(path + ": " + msg);
        break;
      case "already-exists":
        out = new FileAlreadyExistsException(path + ": " + msg);
        break;
      case "permission-denied":
        out = new AccessControlException(path + ": " + msg);
        break;
      case "is-a-directory":
        out = new PathIsDirectoryException(path);
        break;
      case "not-a-directory":
        out = new ParentNotDirectoryException(path + ": " + msg);
        break;
      case "directory-not-empty":
        out = new PathIsNotEmptyDirectoryException(path);
        break;
      case "invalid-argument":
        out = new PathIOException(path, msg);
        break;
      case "unavailable":
        // ConnectException: what Hadoop's retry policies and users look for
        // when a service is down; the master's address says which.
        out = new ConnectException("Thaw master " + master + " unavailable (" + path + "): " + msg);
        break;
      case "timeout":
        out = new SocketTimeoutException("Thaw master " + master + " timed out (" + path + "): " + msg);
        break;
      default:
        out = new IOException(path + ": " + msg + " [" + e.kind() + "]");
        break;
    }
    if (out.getCause() == null) {
      out.initCause(e);
    }
    return out;
  }
}
