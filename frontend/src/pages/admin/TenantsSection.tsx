import { Fragment, useRef, useState } from 'react';
import type { AdminApi, AdminTenant, QuotaReport } from '../../api/admin';
import type { ApiError } from '../../api/errors';
import { formatAmount, gpuCeiling, guaranteedOf } from './display';
import { QuotaForm } from './QuotaForm';
import { UsageBar } from './UsageBar';

interface TenantsSectionProps {
  api: AdminApi;
  tenants: AdminTenant[] | null;
  error: ApiError | null;
  onSaved: (report: QuotaReport) => void;
}

function TenantCells({ t }: { t: AdminTenant }) {
  const { limits, usage } = t;
  const guaranteed = guaranteedOf(t);
  const ceiling = gpuCeiling(t);
  const gpuDetail = [
    `guarantee ${guaranteed} + borrow ${limits.borrow_limit_gpus} ${t.device_type}`,
    usage.borrowed_gpus ? `${usage.borrowed_gpus} borrowed` : '',
  ]
    .filter(Boolean)
    .join(' · ');
  return (
    <>
      <th scope="row" className="col-tenant">
        <span className="tenant-title">{t.name}</span> <code className="tenant-slug">{t.tenant}</code>
        <div className="tenant-facts muted">
          ≤ {limits.max_gpus_per_job} GPUs/job · priority ≤ {formatAmount(limits.priority_limit)} · weight{' '}
          {formatAmount(limits.fair_share_weight)}
        </div>
      </th>
      <td>
        <UsageBar
          testId="tenant-gpus"
          label={`GPUs held by ${t.name}`}
          value={usage.gpus_held}
          max={ceiling}
          text={`${usage.gpus_held} / ${ceiling}`}
          detail={gpuDetail}
          marker={guaranteed > 0 ? { at: guaranteed, label: `guarantee: ${guaranteed}` } : undefined}
        />
      </td>
      <td>
        <UsageBar
          testId="tenant-running"
          label={`Running jobs of ${t.name}`}
          value={usage.running_jobs}
          max={limits.max_running_jobs}
          text={`${usage.running_jobs} / ${limits.max_running_jobs}`}
        />
      </td>
      <td>
        <UsageBar
          testId="tenant-queued"
          label={`Queued jobs of ${t.name}`}
          value={usage.queued_jobs}
          max={limits.max_queued_jobs}
          text={`${usage.queued_jobs} / ${limits.max_queued_jobs}`}
        />
      </td>
      <td>
        <UsageBar
          testId="tenant-gpu-hours"
          label={`GPU-hours of ${t.name} this month`}
          value={usage.gpu_hours_this_month}
          max={limits.monthly_gpu_hours}
          text={`${formatAmount(usage.gpu_hours_this_month)} / ${formatAmount(limits.monthly_gpu_hours)} h`}
          detail={`then ${limits.budget_action === 'pause' ? 'pause running jobs' : 'block new jobs'}`}
        />
      </td>
    </>
  );
}

/** Every tenant's quota against its usage, each with a quota form that opens in place. */
export function TenantsSection({ api, tenants, error, onSaved }: TenantsSectionProps) {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const editButtons = useRef(new Map<string, HTMLButtonElement>());

  const toggle = (slug: string, to: boolean) => {
    setOpen((prev) => {
      const next = new Set(prev);
      if (to) next.add(slug);
      else next.delete(slug);
      return next;
    });
    if (!to) editButtons.current.get(slug)?.focus();
  };

  return (
    <section className="admin-section" aria-labelledby="admin-tenants-title" data-testid="admin-tenants">
      <div className="section-head">
        <h2 id="admin-tenants-title">Tenants</h2>
        {tenants && <span className="muted">{tenants.length === 1 ? '1 tenant' : `${tenants.length} tenants`}</span>}
      </div>
      {error && (
        <div className="notice notice-error" role="alert">
          Could not refresh the tenants: {error.message}
        </div>
      )}
      {tenants === null ? (
        !error && <p className="muted">Loading tenants…</p>
      ) : tenants.length === 0 ? (
        <p className="muted empty">No tenants yet.</p>
      ) : (
        <div className="table-scroll">
          <table className="jobs-table admin-table tenants-table">
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">GPUs held / guarantee + borrow</th>
                <th scope="col">Running / max</th>
                <th scope="col">Queued / max</th>
                <th scope="col">GPU-hours this month / budget</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tenants.map((t) => {
                const isOpen = open.has(t.tenant);
                const formId = `quota-form-${t.tenant}`;
                return (
                  <Fragment key={t.tenant}>
                    <tr data-testid="tenant-row" data-tenant={t.tenant} className={isOpen ? 'row-open' : undefined}>
                      <TenantCells t={t} />
                      <td className="col-actions">
                        <button
                          type="button"
                          className="btn btn-small"
                          data-testid="edit-quota"
                          aria-expanded={isOpen}
                          aria-controls={isOpen ? formId : undefined}
                          ref={(el) => {
                            if (el) editButtons.current.set(t.tenant, el);
                            else editButtons.current.delete(t.tenant);
                          }}
                          onClick={() => toggle(t.tenant, !isOpen)}
                        >
                          {isOpen ? 'Close quota' : 'Edit quota'}
                          <span className="visually-hidden"> of {t.name}</span>
                        </button>
                      </td>
                    </tr>
                    {isOpen && (
                      <tr className="quota-row">
                        <td colSpan={6}>
                          <QuotaForm
                            api={api}
                            tenant={t}
                            id={formId}
                            onSaved={onSaved}
                            onClose={() => toggle(t.tenant, false)}
                          />
                        </td>
                      </tr>
                    )}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
