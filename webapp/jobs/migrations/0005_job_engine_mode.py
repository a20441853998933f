"""Every job records the engine mode it ran under. Jobs stored before then get it from what
they left behind: only a real engine sends samples, so a job with samples ran for real and one
that finished a step without any was simulated; one that never finished a step gets the
service's current ENGINE_MODE, the mode it was submitted under unless the setting changed."""

from typing import Any

from django.conf import settings
from django.db import migrations, models


def infer_engine_modes(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("jobs", "Job")
    JobEvent = apps.get_model("jobs", "JobEvent")
    JobMetrics = apps.get_model("jobs", "JobMetrics")
    sampled = JobEvent.objects.filter(kind="samples").values("job_id")
    stepped = JobMetrics.objects.values("job_id")
    Job.objects.filter(pk__in=sampled).update(engine_mode="real")
    Job.objects.exclude(pk__in=sampled).filter(pk__in=stepped).update(engine_mode="simulated")
    Job.objects.exclude(pk__in=sampled).exclude(pk__in=stepped).update(engine_mode=settings.ENGINE_MODE)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0004_samples_event_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="engine_mode",
            field=models.CharField(
                choices=[("simulated", "Simulated"), ("real", "Real")],
                default="simulated",
                help_text="The engine mode it was submitted under (the service's ENGINE_MODE then).",
                max_length=16,
            ),
        ),
        migrations.RunPython(infer_engine_modes, migrations.RunPython.noop),
    ]
