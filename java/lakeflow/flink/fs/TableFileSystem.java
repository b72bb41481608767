package lakeflow.flink.fs;

import java.io.IOException;
import java.net.URI;
import java.time.Instant;
import java.util.Map;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.fs.BlockLocation;
import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.fs.FSDataOutputStream;
import org.apache.flink.core.fs.FileStatus;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.core.fs.RecoverableFsDataOutputStream;
import org.apache.flink.core.fs.RecoverableWriter;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.fs.s3hadoop.S3FileSystemFactory;

/**
 * One table's S3 filesystem ({@code lakeflow-s3://<namespace>.<table>@<bucket>/…}): Flink's own S3
 * filesystem ({@code flink-s3-fs-hadoop}: S3A and its recoverable writer) configured with this table's
 * vended credentials only, re-vended halfway to their expiry (a new delegate; the streams a checkpoint
 * interval keeps open finish on the one that opened them). Paths are translated to {@code s3://<bucket>/…}
 * on the way in and back on the way out; the recoverable writer's state holds object keys only, so a part
 * file opened before a re-vend is committed after it.
 */
final class TableFileSystem extends FileSystem {

    private final URI uri;
    private final String bucket;
    private final String namespace;
    private final String table;
    private final Configuration config;
    private FileSystem delegate;
    private Instant refreshAt = Instant.MIN;

    TableFileSystem(URI uri, Configuration config) throws IOException {
        String authority = uri.getRawAuthority();
        int at = authority == null ? -1 : authority.lastIndexOf('@');
        int dot = at < 0 ? -1 : authority.lastIndexOf('.', at);
        if (at < 0 || dot < 1 || at == authority.length() - 1) {
            throw new IOException("lakeflow-s3: expected lakeflow-s3://<namespace>.<table>@<bucket>/…, got " + uri);
        }
        this.uri = URI.create(TableFileSystemFactory.SCHEME + "://" + authority + "/");
        this.namespace = authority.substring(0, dot);
        this.table = authority.substring(dot + 1, at);
        this.bucket = authority.substring(at + 1);
        this.config = config;
        if (config.getString(TableFileSystemFactory.CREDENTIAL_COMMAND, null) == null) {
            throw new IOException("lakeflow-s3: this process's configuration has no "
                    + TableFileSystemFactory.CREDENTIAL_COMMAND + " (lakeflow flink up sets it)");
        }
    }

    /** The S3 filesystem holding this table's current credentials (vended now if due). */
    private synchronized FileSystem s3() throws IOException {
        Instant now = Instant.now();
        if (delegate == null || !now.isBefore(refreshAt)) {
            TableCredentials credentials = TableCredentials.vend(
                    config.getString(TableFileSystemFactory.CREDENTIAL_COMMAND, null), namespace, table);
            Configuration own = new Configuration(config);
            own.setString("fs.s3a.aws.credentials.provider", credentials.sessionToken != null
                    ? "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
                    : "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
            own.setString("fs.s3a.access.key", credentials.accessKey);
            own.setString("fs.s3a.secret.key", credentials.secretKey);
            if (credentials.sessionToken != null) {
                own.setString("fs.s3a.session.token", credentials.sessionToken);
            }
            S3FileSystemFactory factory = new S3FileSystemFactory();
            factory.configure(own);
            delegate = factory.create(URI.create("s3://" + bucket + "/"));
            refreshAt = credentials.refreshAt(now);
        }
        return delegate;
    }

    private Path toS3(Path path) {
        return new Path("s3", bucket, path.toUri().getPath());
    }

    private Path fromS3(Path path) {
        return new Path(TableFileSystemFactory.SCHEME, uri.getRawAuthority(), path.toUri().getPath());
    }

    private FileStatus fromS3(FileStatus status) {
        Path path = fromS3(status.getPath());
        return new FileStatus() {
            @Override public long getLen() { return status.getLen(); }
            @Override public long getBlockSize() { return status.getBlockSize(); }
            @Override public short getReplication() { return status.getReplication(); }
            @Override public long getModificationTime() { return status.getModificationTime(); }
            @Override public long getAccessTime() { return status.getAccessTime(); }
            @Override public boolean isDir() { return status.isDir(); }
            @Override public Path getPath() { return path; }
        };
    }

    @Override public Path getWorkingDirectory() { return new Path(uri); }
    @Override public Path getHomeDirectory() { return new Path(uri); }
    @Override public URI getUri() { return uri; }
    @Override public boolean isDistributedFS() { return true; }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        return fromS3(s3().getFileStatus(toS3(f)));
    }

    @Override
    public BlockLocation[] getFileBlockLocations(FileStatus file, long start, long len) throws IOException {
        FileSystem s3 = s3();
        return s3.getFileBlockLocations(s3.getFileStatus(toS3(file.getPath())), start, len);
    }

    @Override public FSDataInputStream open(Path f, int bufferSize) throws IOException { return s3().open(toS3(f), bufferSize); }
    @Override public FSDataInputStream open(Path f) throws IOException { return s3().open(toS3(f)); }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
        FileStatus[] listed = s3().listStatus(toS3(f));
        if (listed == null) {
            return null;
        }
        FileStatus[] out = new FileStatus[listed.length];
        for (int i = 0; i < listed.length; i++) {
            out[i] = fromS3(listed[i]);
        }
        return out;
    }

    @Override public boolean delete(Path f, boolean recursive) throws IOException { return s3().delete(toS3(f), recursive); }
    @Override public boolean mkdirs(Path f) throws IOException { return s3().mkdirs(toS3(f)); }
    @Override public FSDataOutputStream create(Path f, WriteMode overwrite) throws IOException { return s3().create(toS3(f), overwrite); }
    @Override public boolean rename(Path src, Path dst) throws IOException { return s3().rename(toS3(src), toS3(dst)); }

    @Override
    public RecoverableWriter createRecoverableWriter() throws IOException {
        return new TableWriter(s3().createRecoverableWriter());
    }

    @Override
    public RecoverableWriter createRecoverableWriter(Map<String, String> conf) throws IOException {
        return new TableWriter(s3().createRecoverableWriter(conf));
    }

    /**
     * The recoverable writer of the current delegate: each call asks for it anew, so a file opened,
     * resumed or committed after a re-vend uses the fresh credentials; serializers are the first's.
     */
    private final class TableWriter implements RecoverableWriter {

        private final RecoverableWriter first;

        TableWriter(RecoverableWriter first) {
            this.first = first;
        }

        private RecoverableWriter current() throws IOException {
            return s3().createRecoverableWriter();
        }

        @Override
        public RecoverableFsDataOutputStream open(Path path) throws IOException {
            return current().open(toS3(path));
        }

        @Override
        public RecoverableFsDataOutputStream recover(ResumeRecoverable resumable) throws IOException {
            return current().recover(resumable);
        }

        @Override
        public boolean requiresCleanupOfRecoverableState() {
            return first.requiresCleanupOfRecoverableState();
        }

        @Override
        public boolean cleanupRecoverableState(ResumeRecoverable resumable) throws IOException {
            return current().cleanupRecoverableState(resumable);
        }

        @Override
        public RecoverableFsDataOutputStream.Committer recoverForCommit(CommitRecoverable recoverable) throws IOException {
            return current().recoverForCommit(recoverable);
        }

        @Override
        public SimpleVersionedSerializer<CommitRecoverable> getCommitRecoverableSerializer() {
            return first.getCommitRecoverableSerializer();
        }

        @Override
        public SimpleVersionedSerializer<ResumeRecoverable> getResumeRecoverableSerializer() {
            return first.getResumeRecoverableSerializer();
        }

        @Override
        public boolean supportsResume() {
            return first.supportsResume();
        }
    }
}
