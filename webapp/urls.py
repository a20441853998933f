from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from webapp import health, spa
from webapp.observability import scrape

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", scrape.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include("webapp.jobs.api.urls")),
    path("api/v1/", include("webapp.webhooks.api.urls")),
    path("", spa.dashboard, name="dashboard"),
    re_path(r"^(?P<path>(?:jobs|new|manage|compare|cluster)(?:/.*)?)$", spa.dashboard, name="dashboard-route"),
]

# Under /api/ these answer in the API's one error shape; elsewhere Django's own pages.
handler400 = "webapp.api.errors.bad_request"
handler404 = "webapp.api.errors.not_found"
handler500 = "webapp.api.errors.server_error"
