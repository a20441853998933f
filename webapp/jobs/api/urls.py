from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from webapp.jobs.api import account_views, admin_views
from webapp.jobs.api.download_views import CheckpointDownloadView
from webapp.jobs.api.estimate_views import JobAccuracyView, JobEstimateView
from webapp.jobs.api.model_views import ModelsView
from webapp.jobs.api.reward_views import RewardsView
from webapp.jobs.api.streams import JobEventStreamView
from webapp.jobs.api.views import JobViewSet, MeView, PresetsView

router = SimpleRouter()
router.trailing_slash = "/?"  # accept /jobs and /jobs/ alike: API clients differ
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    path("me", MeView.as_view(), name="me"),
    path("presets", PresetsView.as_view(), name="presets"),
    path("models", ModelsView.as_view(), name="models"),
    path("rewards", RewardsView.as_view(), name="rewards"),
    path("quota", account_views.QuotaView.as_view(), name="quota"),
    path("usage", account_views.UsageView.as_view(), name="usage"),
    path("cluster/timeline", account_views.ClusterTimelineView.as_view(), name="cluster-timeline"),
    path("api-keys", account_views.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<str:key_id>", account_views.ApiKeyDetailView.as_view(), name="api-key"),
    path("admin/tenants", admin_views.AdminTenantsView.as_view(), name="admin-tenants"),
    path("admin/tenants/<slug:slug>/quota", admin_views.AdminQuotaView.as_view(), name="admin-quota"),
    path(
        "admin/tenants/<slug:slug>/members/<str:username>", admin_views.AdminMemberView.as_view(), name="admin-member"
    ),
    path("admin/usage", admin_views.AdminUsageView.as_view(), name="admin-usage"),
    path("admin/queue", admin_views.AdminQueueView.as_view(), name="admin-queue"),
    path("admin/cluster", admin_views.AdminClusterView.as_view(), name="admin-cluster"),
    path("admin/audit", admin_views.AdminAuditView.as_view(), name="admin-audit"),
    re_path(r"^jobs/estimate/?$", JobEstimateView.as_view(), name="job-estimate"),
    re_path(r"^jobs/(?P<pk>[0-9a-fA-F-]{32,36})/estimate/?$", JobAccuracyView.as_view(), name="job-estimate-accuracy"),
    re_path(r"^jobs/(?P<pk>[0-9a-fA-F-]{32,36})/events/stream/?$", JobEventStreamView.as_view(), name="job-stream"),
    re_path(
        r"^jobs/(?P<pk>[0-9a-fA-F-]{32,36})/checkpoints/(?P<step>[0-9]{1,9})/download/?$",
        CheckpointDownloadView.as_view(),
        name="job-checkpoint-download",
    ),
    path("", include("webapp.datasets.api.urls")),
    *router.urls,
]
