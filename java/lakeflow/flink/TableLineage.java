package lakeflow.flink;

import java.io.Serializable;
import java.net.URI;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.flink.streaming.api.lineage.DatasetSchemaFacet;
import org.apache.flink.streaming.api.lineage.DatasetSchemaField;
import org.apache.flink.streaming.api.lineage.DefaultLineageDataset;
import org.apache.flink.streaming.api.lineage.LineageDataset;
import org.apache.flink.streaming.api.lineage.LineageDatasetFacet;

/**
 * The table a lakeflow sink writes, as a FLIP-314 {@link LineageDataset}: named by its location in
 * OpenLineage naming (what {@code lakeflow.lineage.datasets.from_location} gives: {@code s3://bucket}
 * + key, {@code file} + absolute path; {@code s3a}/{@code s3n} are {@code s3}), with two facets:
 * {@link TableFacet} (catalog, warehouse, namespace, table) and {@link SchemaFacet} (the declared
 * schema's top-level fields and their Flink SQL types, nested ones as {@code ROW<…>}, {@code ARRAY<…>},
 * {@code MAP<STRING, …>}).
 */
public final class TableLineage implements Serializable {

    private static final long serialVersionUID = 1L;

    private final String location;
    private final TableFacet table;
    private final SchemaFacet schema;

    public TableLineage(String location, String catalog, String catalogUri, String warehouse,
            String namespace, String table, String[] fieldNames, String[] fieldTypes) {
        this.location = location;
        this.table = new TableFacet(catalog, catalogUri, warehouse, namespace, table);
        this.schema = new SchemaFacet(fieldNames, fieldTypes);
    }

    /** The dataset, built fresh on each call (a {@link DefaultLineageDataset} is not serializable). */
    public LineageDataset dataset() {
        String[] id = datasetId(location);
        Map<String, LineageDatasetFacet> facets = new LinkedHashMap<>();
        facets.put(table.name(), table);
        facets.put(schema.name(), schema);
        return new DefaultLineageDataset(id[1], id[0], facets);
    }

    /** {@code [namespace, name]} of the dataset stored at {@code location} (a URI or an absolute path);
     * a user or password in the URI is left out. */
    static String[] datasetId(String location) {
        URI uri = URI.create(location);
        String scheme = uri.getScheme() == null ? "" : uri.getScheme();
        if (scheme.equals("s3a") || scheme.equals("s3n")) {
            scheme = "s3";
        }
        String path = uri.getPath() == null ? "" : uri.getPath().replaceAll("/+$", "");
        if (path.isEmpty()) {
            path = "/";
        }
        if (scheme.isEmpty()) {
            return new String[] {"file", Paths.get(location).toAbsolutePath().normalize().toString()};
        }
        if (scheme.equals("file")) {
            return new String[] {"file", path};
        }
        String authority = uri.getRawAuthority() == null ? "" : uri.getRawAuthority();
        String namespace = scheme + "://" + authority.substring(authority.lastIndexOf('@') + 1);  // no user:password@
        boolean objectStore = scheme.equals("s3") || scheme.equals("gs") || scheme.equals("hdfs")
                || scheme.startsWith("abfs");
        return new String[] {namespace, objectStore ? path.replaceFirst("^/+", "") : path};
    }

    /** The table's catalog identity; the listener turns it into a {@code symlinks} alias too. */
    public static final class TableFacet implements LineageDatasetFacet, Serializable {
        private static final long serialVersionUID = 1L;
        public static final String NAME = "lakeflow_table";

        public final String catalog;
        public final String catalogUri;
        public final String warehouse;
        public final String namespace;
        public final String table;

        TableFacet(String catalog, String catalogUri, String warehouse, String namespace, String table) {
            this.catalog = catalog;
            this.catalogUri = catalogUri;
            this.warehouse = warehouse;
            this.namespace = namespace;
            this.table = table;
        }

        @Override
        public String name() {
            return NAME;
        }
    }

    /** Field name → Flink SQL type of the declared fields, in their declared order. */
    public static final class SchemaFacet implements DatasetSchemaFacet, Serializable {
        private static final long serialVersionUID = 1L;
        public static final String NAME = "schema";

        private final String[] names;
        private final String[] types;

        SchemaFacet(String[] names, String[] types) {
            if (names.length != types.length) {
                throw new IllegalArgumentException("SchemaFacet: " + names.length + " field names but "
                        + types.length + " types");
            }
            this.names = names.clone();
            this.types = types.clone();
        }

        @Override
        public String name() {
            return NAME;
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> Map<String, DatasetSchemaField<T>> fields() {
            Map<String, DatasetSchemaField<T>> fields = new LinkedHashMap<>();
            for (int i = 0; i < names.length; i++) {
                fields.put(names[i], (DatasetSchemaField<T>) new Field(names[i], types[i]));
            }
            return Collections.unmodifiableMap(fields);
        }
    }

    /** One field of {@link SchemaFacet}: its type is the Flink SQL type as text. */
    static final class Field implements DatasetSchemaField<String>, Serializable {
        private static final long serialVersionUID = 1L;
        private final String name;
        private final String type;

        Field(String name, String type) {
            this.name = name;
            this.type = type;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public String type() {
            return type;
        }
    }
}
