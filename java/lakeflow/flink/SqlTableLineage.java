package lakeflow.flink;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.flink.streaming.api.lineage.LineageDataset;

/**
 * A SQL table as Flink's planner hands it to a job status listener (its {@code TableLineageDataset}:
 * the resolved catalog table with its options, the catalog context, the identifier), named by what
 * it is, as {@code lakeflow.lineage.resolve} names a table the SQL Gateway shows:
 *
 * <ul>
 *   <li>Kafka ({@code kafka}, {@code upsert-kafka}): {@code kafka://<first bootstrap server>} and
 *       each topic of {@code topic} (a {@code ;} list); a {@code topic-pattern} is one dataset named
 *       by the pattern, marked as such ({@link #topicPattern});
 *   <li>{@code filesystem}: its {@code path}, named as {@link TableLineage#datasetId} names a location;
 *   <li>{@code jdbc}: {@code <platform>://host:port} and {@code database[.schema].table} from
 *       {@code url} and {@code table-name} (the schema a platform defaults to when the name has none);
 *   <li>anything else: no dataset ({@link #datasets} empty): the harvest resolves it, or says why not.
 * </ul>
 *
 * <p>Only the options named above are read: passwords, keys, {@code sasl.jaas.config} and the rest
 * never leave the JVM, nor does a URL's user, password or query. The planner's classes are not on
 * every class loader the listener runs in (the SQL Gateway, {@code flink run}, PyFlink's client), so
 * they are reached by reflection through their public interfaces.
 */
public final class SqlTableLineage {

    /** The facet lakeflow's listener gives each dataset of a SQL table. */
    public static final String FACET = "lakeflow_flink_table";
    /** The table's scope: a persistent catalog's, or known only to the process that planned the job. */
    public static final String CATALOG = "catalog";
    public static final String IN_MEMORY = "in-memory";
    public static final String TEMPORARY = "temporary";
    public static final String ANONYMOUS = "anonymous";

    static final String IN_MEMORY_CATALOG = "org.apache.flink.table.catalog.GenericInMemoryCatalog";
    static final Map<String, String> JDBC_PLATFORMS = new LinkedHashMap<>();
    static final Map<String, Integer> JDBC_PORTS = new LinkedHashMap<>();
    static final Map<String, String> JDBC_SCHEMAS = new LinkedHashMap<>();

    static {
        String[][] platforms = {{"jdbc:postgresql", "postgres"}, {"jdbc:mysql", "mysql"},
            {"jdbc:sqlserver", "mssql"}, {"jdbc:oracle", "oracle"}, {"jdbc:db2", "db2"},
            {"jdbc:mariadb", "mariadb"}, {"jdbc:redshift", "redshift"}, {"jdbc:snowflake", "snowflake"}};
        for (String[] p : platforms) {
            JDBC_PLATFORMS.put(p[0], p[1]);
        }
        JDBC_PORTS.put("postgres", 5432);
        JDBC_PORTS.put("mysql", 3306);
        JDBC_PORTS.put("mariadb", 3306);
        JDBC_PORTS.put("mssql", 1433);
        JDBC_SCHEMAS.put("postgres", "public");
        JDBC_SCHEMAS.put("redshift", "public");
        JDBC_SCHEMAS.put("mssql", "dbo");
    }

    private final String identifier;
    private final String kind;
    private final String connector;
    private final String topicPattern;
    private final List<String[]> datasets = new ArrayList<>();

    /** The table {@code identifier} ({@code catalog.database.table}) of scope {@code kind}, from its options. */
    public SqlTableLineage(String identifier, String kind, Map<String, String> options) {
        this.identifier = identifier;
        this.kind = kind;
        this.connector = options.getOrDefault("connector", "");
        String pattern = null;
        if (connector.equals("kafka") || connector.equals("upsert-kafka")) {
            String servers = options.getOrDefault("properties.bootstrap.servers", "").split(",")[0].trim();
            String namespace = servers.isEmpty() ? "kafka" : "kafka://" + servers.substring(servers.lastIndexOf('@') + 1);
            for (String topic : options.getOrDefault("topic", "").split(";")) {
                if (!topic.trim().isEmpty()) {
                    datasets.add(new String[] {namespace, topic.trim()});
                }
            }
            pattern = datasets.isEmpty() ? options.get("topic-pattern") : null;
            if (pattern != null) {
                datasets.add(new String[] {namespace, pattern});
            }
        } else if (connector.equals("filesystem") && !options.getOrDefault("path", "").isEmpty()) {
            datasets.add(TableLineage.datasetId(options.get("path")));
        } else if (connector.equals("jdbc")) {
            String table = options.getOrDefault("table-name", "");
            String[] id = jdbc(options.getOrDefault("url", ""), table.isEmpty() ? objectName(identifier) : table);
            if (id != null) {
                datasets.add(id);
            }
        }
        this.topicPattern = pattern;
    }

    /** The SQL table {@code d} stands for, or null when {@code d} is not the planner's table lineage dataset. */
    static SqlTableLineage of(LineageDataset d) {
        Object table = call(d, "table");
        Object options = table == null ? null : call(table, "getOptions");
        if (!(options instanceof Map)) {
            return null;
        }
        Map<String, String> strings = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) options).entrySet()) {
            strings.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
        }
        return new SqlTableLineage(d.name(), kind(d), strings);
    }

    private static String kind(LineageDataset d) {
        if (call(d, "objectPath") == null) {
            return ANONYMOUS;
        }
        Object context = call(d, "catalogContext");
        Object catalog = context == null ? null : call(context, "getCatalogName");
        if (catalog == null || catalog.toString().isEmpty()) {
            return TEMPORARY;  // the planner gives a temporary table no catalog
        }
        Object type = call(context, "getClazz");
        for (Class<?> c = type instanceof Class ? (Class<?>) type : null; c != null; c = c.getSuperclass()) {
            if (c.getName().equals(IN_MEMORY_CATALOG)) {
                return IN_MEMORY;
            }
        }
        return CATALOG;
    }

    /** {@code target.name()} through a public class or interface declaring it; null when it cannot be called. */
    static Object call(Object target, String name) {
        Method method = publicMethod(target.getClass(), name);
        try {
            return method == null ? null : method.invoke(target);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    private static Method publicMethod(Class<?> type, String name) {
        if (type == null) {
            return null;
        }
        if (Modifier.isPublic(type.getModifiers())) {
            try {
                return type.getMethod(name);
            } catch (NoSuchMethodException e) {
                return null;
            }
        }
        for (Class<?> i : type.getInterfaces()) {
            Method m = publicMethod(i, name);
            if (m != null) {
                return m;
            }
        }
        return publicMethod(type.getSuperclass(), name);
    }

    /** A JDBC table as OpenLineage names it: {@code [<platform>://host:port, database[.schema].table]};
     * null for a URL of an unknown platform. Never the URL's user, password or query. */
    static String[] jdbc(String url, String table) {
        String platform = null;
        for (Map.Entry<String, String> p : JDBC_PLATFORMS.entrySet()) {
            if (url.startsWith(p.getKey())) {
                platform = p.getValue();
                break;
            }
        }
        if (platform == null) {
            return null;
        }
        String[] parts = url.substring("jdbc:".length()).split(";");
        String host = "";
        String database = "";
        try {
            URI uri = new URI(parts[0]);
            int port = uri.getPort() >= 0 ? uri.getPort() : JDBC_PORTS.getOrDefault(platform, -1);
            if (uri.getHost() != null) {
                String name = uri.getHost().toLowerCase(Locale.ROOT);
                host = port >= 0 ? name + ":" + port : name;
            }
            database = uri.getPath() == null ? "" : uri.getPath().replaceAll("^/+|/+$", "");
        } catch (URISyntaxException e) {
            // an address that is no URI (Oracle's thin syntax): the platform alone
        }
        Map<String, String> properties = new LinkedHashMap<>();
        for (int i = 1; i < parts.length; i++) {
            String[] kv = parts[i].split("=", 2);
            if (kv.length == 2) {
                properties.put(kv[0], kv[1]);
            }
        }
        for (String key : new String[] {"databaseName", "database"}) {
            database = database.isEmpty() ? properties.getOrDefault(key, "") : database;
        }
        String schema = JDBC_SCHEMAS.get(platform);
        String name = schema != null && !table.contains(".") ? schema + "." + table : table;
        return new String[] {host.isEmpty() ? platform : platform + "://" + host,
            database.isEmpty() ? name : database + "." + name};
    }

    /** What follows catalog and database in an identifier ({@code public.alerts} of {@code pg.shop.public.alerts}). */
    static String objectName(String identifier) {
        String[] parts = identifier.split("\\.", 3);
        return parts[parts.length - 1];
    }

    public String identifier() {
        return identifier;
    }

    public String kind() {
        return kind;
    }

    public String connector() {
        return connector;
    }

    /** The {@code topic-pattern} of a Kafka table that names no topic; null otherwise. */
    public String topicPattern() {
        return topicPattern;
    }

    /** {@code [namespace, name]} of each dataset the table is; empty when the listener cannot tell. */
    public List<String[]> datasets() {
        return Collections.unmodifiableList(datasets);
    }
}
