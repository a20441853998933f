from django.urls import path
from rest_framework.routers import SimpleRouter

from webapp.jobs.api.views import JobViewSet, MeView, PresetsView

router = SimpleRouter()
router.trailing_slash = "/?"  # accept /jobs and /jobs/ alike: API clients differ
router.register("jobs", JobViewSet, basename="job")

urlpatterns = [
    path("me", MeView.as_view(), name="me"),
    path("presets", PresetsView.as_view(), name="presets"),
    *router.urls,
]
