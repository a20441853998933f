from django.urls import path, re_path

from webapp.datasets.api import views

urlpatterns = [
    re_path(r"^datasets/?$", views.DatasetListView.as_view(), name="datasets"),
    path("datasets/<str:name>", views.DatasetDetailView.as_view(), name="dataset"),
    path("graders/dry-run", views.GraderDryRunView.as_view(), name="grader-dry-run"),
]
