import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { caller } from '../../platform/route.js';
import { ALL_PERMISSIONS, PERMISSIONS, ROLES } from './catalogue.js';

const role = z.object({ key: z.string(), name: z.string(), description: z.string(), permissions: z.array(z.string()) });
const tags = ['Users, roles and settings'];

export async function rolesRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/roles',
    {
      ...caller('role:read'),
      schema: { summary: 'Built-in roles', tags, response: { 200: z.object({ items: z.array(role) }) } },
    },
    async () => ({ items: ROLES.map((x) => ({ ...x, permissions: [...x.permissions] })) }),
  );

  r.get(
    '/roles/permissions',
    {
      ...caller('role:read'),
      schema: {
        summary: 'Permission catalogue and role matrix',
        tags,
        response: {
          200: z.object({
            permissions: z.array(z.object({ key: z.string(), description: z.string() })),
            matrix: z.record(z.string(), z.array(z.string())),
          }),
        },
      },
    },
    async () => ({
      permissions: ALL_PERMISSIONS.map((key) => ({ key, description: PERMISSIONS[key] })),
      matrix: Object.fromEntries(ROLES.map((x) => [x.key, [...x.permissions]])),
    }),
  );
}
