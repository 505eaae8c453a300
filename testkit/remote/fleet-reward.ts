/**
 * A reward module for the fleet tests and bench: the share of a response's characters that are digits.
 * It varies between samples of a random model, so advantages are not all 0 and every step moves the
 * adapter (a resumed run that samples with the wrong adapter then shows in its log-prob gap).
 */
import { defineReward } from 'arbor';

export default defineReward('digits', ({ response }) =>
  response.length ? [...response].filter((c) => c >= '0' && c <= '9').length / response.length : 0,
);
