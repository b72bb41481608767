package lakeflow.flink.fs;

import java.io.IOException;
import java.net.URI;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.FileSystemFactory;

/**
 * The {@code lakeflow-s3} scheme: one S3 filesystem per table, each holding only that table's vended
 * credentials. A URI names the table as its user part and the bucket as its host,
 * {@code lakeflow-s3://<namespace>.<table>@<bucket>/<key>}; Flink caches a filesystem per scheme and
 * authority, so each table gets its own {@link TableFileSystem}. Installed beside Flink's
 * {@code flink-s3-fs-hadoop} in its plugin folder (whose S3 filesystem it delegates to); the process's
 * configuration names the command that vends a table's credentials ({@link #CREDENTIAL_COMMAND}).
 */
public final class TableFileSystemFactory implements FileSystemFactory {

    public static final String SCHEME = "lakeflow-s3";
    /** The executable printing a table's credentials as AWS process credentials (lakeflow's CLI). */
    public static final String CREDENTIAL_COMMAND = "lakeflow.fs.credential-command";

    private Configuration config = new Configuration();

    @Override
    public String getScheme() {
        return SCHEME;
    }

    @Override
    public void configure(Configuration config) {
        this.config = config;
    }

    @Override
    public FileSystem create(URI uri) throws IOException {
        return new TableFileSystem(uri, config);
    }
}
