/** The dashboard module's public face: the dashboard's answer, for whoever renders or reports it. */
export { dashboard } from './dashboard.service.js';
export { dashboardOut, type DashboardOut } from './dashboard.schemas.js';
