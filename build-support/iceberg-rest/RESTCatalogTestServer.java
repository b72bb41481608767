/*
 * Apache Iceberg's REST catalog test server (iceberg-open-api's RESTCatalogServer, what the
 * apache/iceberg-rest-fixture image runs), started the way lakeflow's tests need it:
 *
 *   - bound to one host (rest.host, default 127.0.0.1) instead of every interface;
 *   - served under a context path (rest.context-path, e.g. /catalog, as Lakekeeper serves
 *     {LAKEKEEPER}/catalog) — the fixture's servlet routes on the whole request URI;
 *   - optionally under a REST prefix (rest.prefix): GET /v1/config answers overrides.prefix
 *     and the catalog is served at /v1/{prefix}/..., as Lakekeeper does with a warehouse id.
 *
 * Everything else is the fixture's own code, configured exactly like the image: CATALOG_*
 * environment variables become catalog properties (CATALOG_IO__IMPL -> io-impl,
 * CATALOG_S3_ENDPOINT -> s3.endpoint), a JdbcCatalog by default, and with include-credentials=true
 * the load-table responses carry the catalog's s3.access-key-id / s3.secret-access-key / s3.session-token.
 *
 * In package org.apache.iceberg.rest because the fixture's adapter and context are package-private.
 * Compiled by tests/iceberg_rest.py against the jars of build-support/iceberg-rest/pom.xml.
 */
package org.apache.iceberg.rest;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalogServer.CatalogContext;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public final class RESTCatalogTestServer {
  private RESTCatalogTestServer() {}

  /** The fixture's adapter; GET /v1/config also names the prefix when one is set. */
  static final class PrefixedAdapter extends RESTServerCatalogAdapter {
    private final String prefix;

    PrefixedAdapter(CatalogContext context, String prefix) {
      super(context);
      this.prefix = prefix;
    }

    @Override
    public <T extends RESTResponse> T handleRequest(
        Route route,
        Map<String, String> vars,
        HTTPRequest request,
        Class<T> responseType,
        Consumer<Map<String, String>> responseHeaders) {
      T response = super.handleRequest(route, vars, request, responseType, responseHeaders);
      if (route != Route.CONFIG || prefix.isEmpty()) {
        return response;
      }
      ConfigResponse config = (ConfigResponse) response;
      return responseType.cast(
          ConfigResponse.builder()
              .withDefaults(config.defaults())
              .withOverrides(config.overrides())
              .withOverride("prefix", prefix)
              .withEndpoints(config.endpoints())
              .build());
    }
  }

  /** The fixture's servlet, seeing each request URI without the context path and the prefix. */
  static final class PrefixedServlet extends RESTCatalogServlet {
    private final String prefixPath;

    PrefixedServlet(RESTCatalogAdapter adapter, String prefix) {
      super(adapter);
      this.prefixPath = prefix.isEmpty() ? "" : "/v1/" + prefix + "/";
    }

    @Override
    protected void service(HttpServletRequest request, HttpServletResponse response)
        throws ServletException, IOException {
      String path = request.getRequestURI().substring(request.getContextPath().length());
      if (!prefixPath.isEmpty() && path.startsWith(prefixPath)) {
        path = "/v1/" + path.substring(prefixPath.length());
      } else if (!prefixPath.isEmpty() && !path.startsWith("/v1/config")) {
        response.sendError(HttpServletResponse.SC_NOT_FOUND, "not under prefix " + prefixPath);
        return;
      }
      String uri = path;
      super.service(
          new HttpServletRequestWrapper(request) {
            @Override
            public String getRequestURI() {
              return uri;
            }
          },
          response);
    }
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> props = new HashMap<>(RCKUtils.environmentCatalogConfig());
    props.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    props.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    props.putIfAbsent("jdbc.schema-version", "V1");
    String host = props.getOrDefault("rest.host", "127.0.0.1");
    int port = Integer.parseInt(props.getOrDefault(RESTCatalogServer.REST_PORT, "8181"));
    String contextPath = props.getOrDefault("rest.context-path", "/");
    String prefix = props.getOrDefault("rest.prefix", "");

    String name = props.getOrDefault(RESTCatalogServer.CATALOG_NAME, "rest_backend");
    Catalog catalog = CatalogUtil.buildIcebergCatalog(name, props, null);
    RESTCatalogAdapter adapter = new PrefixedAdapter(new CatalogContext(catalog, props), prefix);

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.setContextPath(contextPath);
    context.addServlet(new ServletHolder(new PrefixedServlet(adapter, prefix)), "/*");
    Server server = new Server();
    ServerConnector connector = new ServerConnector(server);
    connector.setHost(host);
    connector.setPort(port);
    server.addConnector(connector);
    server.setHandler(context);
    server.start();
    String root = contextPath.equals("/") ? "" : contextPath;
    System.out.printf("Iceberg REST catalog at http://%s:%d%s%n", host, connector.getLocalPort(), root);
    System.out.flush();
    server.join();
  }
}
